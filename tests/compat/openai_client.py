"""What a client of `policy-router serve` does through the official openai SDK, whichever
version the interpreter running it has: chat whole and streamed, embeddings, Responses
whole and streamed, the model list, and the errors a client acts on (401, 400).

`tests/test_server.py` runs it with this project's SDK (2.x); with the 3.x SDK, which this
project's pinned frameworks cannot install beside them, run it from an interpreter that
has it, against a server you started (the groups of `tests/test_server.py`'s policy):

    python tests/compat/openai_client.py http://127.0.0.1:8000/v1 KEY

It prints the SDK's version and one line per check, and exits 1 on the first that fails.
"""

from __future__ import annotations

import sys

import openai


def check(base: str, key: str) -> list[str]:
    """Each check's line; raises AssertionError on the first that fails."""
    done = [f"openai {openai.__version__}"]
    sdk = openai.OpenAI(base_url=base, api_key=key, max_retries=0)
    messages = [{"role": "user", "content": "Say hello."}]
    raw = sdk.chat.completions.with_raw_response.create(model="smart", messages=messages)  # type: ignore[arg-type]
    answer = raw.parse()
    assert answer.choices[0].message.content, answer
    assert raw.headers["x-policy-router-route"], raw.headers
    done.append(f"chat: {raw.headers['x-policy-router-route']}, {raw.headers.get('x-policy-router-cost')}")
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in sdk.chat.completions.create(model="smart", messages=messages, stream=True)  # type: ignore[arg-type]
        if c.choices
    )
    assert streamed == answer.choices[0].message.content, streamed
    done.append("chat stream: the same text")
    vector = sdk.embeddings.create(model="emb", input="hello").data[0].embedding
    assert vector, vector
    done.append(f"embeddings: {len(vector)} numbers")
    assert sdk.responses.create(model="smart", input="Say hello.").output_text
    kinds = [e.type for e in sdk.responses.create(model="smart", input="Say hello.", stream=True)]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    done.append(f"responses: whole, and {len(kinds)} streamed events")
    assert {m.id for m in sdk.models.list()} >= {"smart", "emb"}
    done.append("models: the groups")
    try:
        openai.OpenAI(base_url=base, api_key="sk-not-a-key", max_retries=0).models.list()
        raise AssertionError("an unknown key was let in")
    except openai.AuthenticationError as refused:
        assert refused.status_code == 401
    try:
        sdk.chat.completions.create(model="smart", messages=messages, extra_body={"api_base": "http://elsewhere"})  # type: ignore[arg-type]
        raise AssertionError("an api_base was passed on")
    except openai.BadRequestError as refused:
        assert "'api_base'" in refused.message
    done.append("errors: 401 for an unknown key, 400 naming api_base")
    return done


if __name__ == "__main__":
    for line in check(sys.argv[1], sys.argv[2]):
        print(line)
