"""LangChain over a `Router`: `ChatPolicyRouter` (a chat model) and `PolicyRouterEmbeddings`.

    model = ChatPolicyRouter(router=router, model="smart", temperature=0, max_tokens=300)
    chain = prompt | model | StrOutputParser()
    store = InMemoryVectorStore(PolicyRouterEmbeddings(router=router, model="embed"))

`ChatPolicyRouter` is a real `langchain_core` `BaseChatModel`: `invoke`, `ainvoke`,
`stream`, `astream`, `batch`, `bind_tools` and `with_structured_output` work as for any
chat model, and the usual settings (`temperature`, `max_tokens`, `stop`, `timeout`,
`max_retries`) reach the call. `PolicyRouterEmbeddings` is a real `Embeddings`. Every call
goes through the router, so requirements, the floor, the breaker, the budget and the
deadline apply; the journey is in each message's `response_metadata["policy_router"]` (as
plain data, so a reply survives LangChain's serialisation and caches), and
token usage in `usage_metadata` (streams included). Needs the `langchain` extra
(`pip install policy-router[langchain]`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    convert_to_openai_messages,
)
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..ground.errors import ConfigError
from ..ground.secrets import scrubbed, secrets_in
from ..policies.retry import Retry
from ..router import Router
from .langchain_messages import chat_result, final_chunk, generation_chunk

__all__ = ["ChatPolicyRouter", "PolicyRouterEmbeddings"]

CONFIG_ENV = "POLICY_ROUTER_CONFIG"
"""The environment variable a model built without `router=` or `config=` reads: the path
of a policy file or LiteLLM proxy config."""

# Routers built from a config file, by its resolved path: every model built from one file
# in this process shares one router, so one budget, one breaker, one set of windows.
_FROM_FILE: dict[str, Router] = {}
_FROM_FILE_LOCK = threading.Lock()


def _with_router(data: Any) -> Any:
    """Fill in `router` from `config` (or `$POLICY_ROUTER_CONFIG`) when it is not given."""
    if not isinstance(data, dict) or data.get("router") is not None:
        return data
    path = data.get("config") or os.environ.get(CONFIG_ENV)
    if not path:
        raise ConfigError(
            f"give router=Router(...), config='policy.yaml', or set {CONFIG_ENV} to a "
            "policy file or a LiteLLM proxy config"
        )
    key = os.path.realpath(path)
    with _FROM_FILE_LOCK:
        router = _FROM_FILE.get(key)
        if router is None:
            router = _FROM_FILE[key] = Router.from_config(path)
    return {**data, "router": router, "config": str(path)}


# The usual chat-model settings, sent to LiteLLM when set.
_SETTINGS = ("temperature", "max_tokens", "stop", "timeout", "top_p", "seed", "n")


class ChatPolicyRouter(BaseChatModel):
    """A LangChain chat model that routes every call through a `Router` group.

    `model` names the group (as `model=` does for `Router.completion`); a per-call
    `model=` (`invoke(..., model="other")`, `bind(model=...)`) routes to that group or
    route instead. `temperature`, `max_tokens`, `stop`, `timeout`, `top_p`, `seed` and `n`
    are sent with every call when set; `max_retries=N` becomes the router's
    `Retry(attempts=N + 1)` for these calls (LiteLLM's own retries stay off: one request
    per attempt). `call_kwargs` holds any other LiteLLM keyword argument, and the router's
    own (`on_device`, `needs`, `deadline`). With `stream_usage` (the default) a stream
    asks for usage and its last chunk carries `usage_metadata`.

    Without `router=`, the router is built from `config=` (a policy file or a LiteLLM
    proxy config), else from the file `$POLICY_ROUTER_CONFIG` names: once per file per
    process, so models built from one file share its budget and breaker.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # The live router (its store, health, windows) is not serialised: a model serialised
    # from `config=` is rebuilt from that file, one built from a router from the file
    # `$POLICY_ROUTER_CONFIG` names, as other chat models read their key from it.
    router: Router = Field(exclude=True)
    config: str | None = None
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    timeout: float | None = None
    top_p: float | None = None
    seed: int | None = None
    n: int | None = None
    max_retries: int | None = None
    stream_usage: bool = True
    call_kwargs: dict[str, Any] = Field(default_factory=dict)

    _router_from_config = model_validator(mode="before")(_with_router)

    @classmethod
    def is_lc_serializable(cls) -> bool:
        """True: `dumpd(model)` writes the settings and `config`, never the live router
        nor a secret held in `call_kwargs` (a key belongs in the config or the
        environment). A model built with `router=` alone is loaded again from the file
        `$POLICY_ROUTER_CONFIG` names. `load` needs this class allowed by name, as for
        any class outside langchain-core's own list: `allowed_objects=[ChatPolicyRouter]`.
        """
        return True

    @classmethod
    def get_lc_namespace(cls) -> list[str]:
        return ["policy_router", "integrations", "langchain"]

    def to_json(self) -> Any:
        serialized = super().to_json()
        kwargs = serialized.get("kwargs")
        if isinstance(kwargs, dict) and isinstance(kwargs.get("call_kwargs"), dict):
            kwargs["call_kwargs"] = scrubbed(
                kwargs["call_kwargs"], secrets_in(self.call_kwargs), drop_named=True, depth=None
            )
        return serialized

    @property
    def _llm_type(self) -> str:
        return "policy-router"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model, **self._settings(), **self.call_kwargs}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "policy_router"
        params["ls_model_name"] = str(kwargs.get("model") or self.model or "")
        return params

    def _settings(self) -> dict[str, Any]:
        return {k: v for k in _SETTINGS if (v := getattr(self, k)) not in (None, [])}

    def _kwargs(
        self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any
    ) -> dict[str, Any]:
        call = {**self._settings(), **self.call_kwargs, **kwargs}
        call["messages"] = convert_to_openai_messages(messages)
        if stop:
            call["stop"] = stop
        if self.max_retries is not None and "retry" not in call:
            call["retry"] = Retry(attempts=self.max_retries + 1)
        call.setdefault("model", self.model)
        return call

    # -- whole answers ---------------------------------------------------------------------
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        routed = self.router.route(**self._kwargs(messages, stop, **kwargs))
        return chat_result(routed.response, routed.journey, routed.route.name)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        routed = await self.router.aroute(**self._kwargs(messages, stop, **kwargs))
        return chat_result(routed.response, routed.journey, routed.route.name)

    # -- streams ---------------------------------------------------------------------------
    def _stream_call(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        call = self._kwargs(messages, stop, **kwargs)
        call["stream"] = True
        if self.stream_usage and "stream_options" not in call:
            call["stream_options"] = {"include_usage": True}
        return call

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        stream = self.router.completion(**self._stream_call(messages, stop, kwargs))
        for chunk in stream:
            generation = generation_chunk(chunk)
            if run_manager is not None and generation.text:
                run_manager.on_llm_new_token(generation.text, chunk=generation)
            yield generation
        yield final_chunk(stream)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        stream = await self.router.acompletion(**self._stream_call(messages, stop, kwargs))
        async for chunk in stream:
            generation = generation_chunk(chunk)
            if run_manager is not None and generation.text:
                await run_manager.on_llm_new_token(generation.text, chunk=generation)
            yield generation
        yield final_chunk(stream)

    # -- tools -----------------------------------------------------------------------------
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        tool_choice: dict[str, Any] | str | bool | None = None,
        *,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools in OpenAI's format (`strict=True` puts `strict` on each function); the
        router then needs routes that can do tools. `tool_choice` takes the forms
        `ChatLiteLLM` and `ChatOpenAI` take: "auto", "none", "required" (or "any"), a tool's
        name, OpenAI's dict (`{"type": "function", "function": {"name": ...}}`, passed as it
        is), True (the one tool bound, or "required" for several) or False (none asked)."""
        formatted = [convert_to_openai_tool(t, strict=strict) for t in tools]
        tool_choice_value: Any
        if tool_choice is None or tool_choice is False:
            tool_choice_value = None
        elif tool_choice is True:
            tool_choice_value = (
                {"type": "function", "function": {"name": formatted[0]["function"]["name"]}}
                if len(formatted) == 1 else "required"
            )
        elif isinstance(tool_choice, dict):
            tool_choice_value = tool_choice
        elif isinstance(tool_choice, str):
            if tool_choice in ("auto", "none", "required", "any"):
                tool_choice_value = "required" if tool_choice == "any" else tool_choice
            else:
                tool_choice_value = {"type": "function", "function": {"name": tool_choice}}
        else:
            raise ConfigError(
                f"tool_choice must be 'auto', 'none', 'required', 'any', a tool's name, a dict or "
                f"a bool, got {type(tool_choice).__name__}"
            )
        if tool_choice_value is not None:
            kwargs["tool_choice"] = tool_choice_value
        return super().bind(tools=formatted, **kwargs)


    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        method: str = "function_calling",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        """Structured output: `method="json_schema"` sends `response_format` (a route with
        structured output and no tools serves it), `"json_mode"` a JSON object;
        `"function_calling"` (the default) binds the schema as a tool, as LangChain does."""
        if method == "function_calling":
            return super().with_structured_output(
                schema, include_raw=include_raw, strict=strict, **kwargs
            )
        if method not in ("json_schema", "json_mode"):
            raise ConfigError(
                f"method must be 'function_calling', 'json_schema' or 'json_mode', got {method!r}"
            )
        pydantic = isinstance(schema, type) and issubclass(schema, BaseModel)
        if method == "json_mode":
            response_format: dict[str, Any] = {"type": "json_object"}
        else:
            function = convert_to_openai_tool(schema, strict=strict)["function"]
            json_schema = {"name": function["name"], "schema": function.get("parameters", {})}
            if strict is not None:
                json_schema["strict"] = strict
            response_format = {"type": "json_schema", "json_schema": json_schema}
        bound = self.bind(response_format=response_format)
        parser: Runnable[Any, Any] = (
            PydanticOutputParser(pydantic_object=schema) if pydantic else JsonOutputParser()  # type: ignore[arg-type]
        )
        if not include_raw:
            return bound | parser
        parsed = RunnablePassthrough.assign(parsed=itemgetter("raw") | parser, parsing_error=lambda _: None)
        return RunnableMap(raw=bound) | parsed.with_fallbacks(
            [RunnablePassthrough.assign(parsed=lambda _: None)], exception_key="parsing_error"
        )


class PolicyRouterEmbeddings(BaseModel, Embeddings):
    """LangChain embeddings through a `Router` group (`Router.embedding`).

    `model` names the group of embedding routes; `call_kwargs` holds other LiteLLM
    keyword arguments (`dimensions`, ...) and the router's own (`on_device`, `deadline`).
    `chunk_size` texts go in one request. The router's policies apply to every request.
    Without `router=`, the router comes from `config=` or `$POLICY_ROUTER_CONFIG`, as for
    `ChatPolicyRouter` (the same router for the same file).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    router: Router
    config: str | None = None
    model: str | None = None
    chunk_size: int = 256
    call_kwargs: dict[str, Any] = Field(default_factory=dict)

    _router_from_config = model_validator(mode="before")(_with_router)

    def _batches(self, texts: list[str]) -> list[list[str]]:
        size = max(self.chunk_size, 1)
        return [texts[i : i + size] for i in range(0, len(texts), size)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        return [
            v
            for batch in self._batches(texts)
            for v in _vectors(
                self.router.embedding(model=self.model, input=batch, **self.call_kwargs)
            )
        ]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for batch in self._batches(texts):
            response = await self.router.aembedding(
                model=self.model, input=batch, **self.call_kwargs
            )
            vectors.extend(_vectors(response))
        return vectors

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.aembed_documents([text]))[0]


def _vectors(response: Any) -> list[list[float]]:
    data = sorted(
        response.data,
        key=lambda d: d["index"] if isinstance(d, dict) else getattr(d, "index", 0),
    )
    return [list(d["embedding"] if isinstance(d, dict) else d.embedding) for d in data]


