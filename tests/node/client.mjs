// The OpenAI Node SDK against `policy-router serve`, each call with the SDK's defaults
// (embeddings asked as base64, its own retries): prints what the caller sees, as JSON.
// node client.mjs BASE_URL KEY
import OpenAI from "openai";

const [base, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base, apiKey: key });
const seen = {};

const chat = await client.chat.completions.create({
  model: "smart", messages: [{ role: "user", content: "Say hello." }],
}).withResponse();
seen.chat = { text: chat.data.choices[0].message.content, requestId: chat.request_id ?? chat.data._request_id };

const stream = await client.chat.completions.create({
  model: "smart", messages: [{ role: "user", content: "Say hello." }], stream: true,
});
let streamed = "";
for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
seen.stream = streamed;

const embedded = await client.embeddings.create({ model: "emb", input: ["one", "two"] });
seen.embeddings = embedded.data.map((d) => d.embedding);

const model = await client.models.retrieve("smart");
seen.model = { id: model.id, object: model.object };

try {
  await client.models.retrieve("no-such-group");
} catch (error) {
  seen.missing = { status: error.status, code: error.code, requestId: error.request_id ?? error.requestID };
}

const completion = await client.completions.create({ model: "smart", prompt: "Say hello.", max_tokens: 20 });
seen.completion = completion.choices[0].text;

console.log(JSON.stringify(seen));
