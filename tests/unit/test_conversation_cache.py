"""The model activity's memory of conversations (activities/conversation_cache.py): a step's
messages come from memory only when the hash chain vouches for every one of them; anything
the worker did not produce itself, or produced differently, is a miss (the query then)."""

from __future__ import annotations

import json

from activities.conversation_cache import ConversationCache, chain_after
from hitl.catalog import CATALOG
from workflows.conversation import ChatMessage, Conversation, FunctionCall, ModelReply, ToolCall
from workflows.requests import ConversationRef, ModelRequest

SYSTEM = ChatMessage(role="system", content="be brief")
FIRST = ChatMessage(role="user", content="search for milk")


def reply(call_id: str = "call_1", query: str = "milk") -> ModelReply:
    arguments = json.dumps({"query": query})
    return ModelReply(content="looking", tool_calls=[ToolCall(id=call_id, function=FunctionCall(name="search_web", arguments=arguments))])


def reference(messages: list[ChatMessage], run_id: str = "run-1") -> ConversationRef:
    return ConversationRef(session_id="s", run_id=run_id, message_count=len(messages), prefix_sha256=chain_after("", messages))


def queried(messages: list[ChatMessage]) -> ModelRequest:
    """What the `model_context` query answers for a conversation small enough to be sent whole."""
    return ModelRequest(messages=[SYSTEM, *messages], tools=[spec.openai_schema() for spec in CATALOG.select(None)])


def after_one_step(cache: ConversationCache, answer: ModelReply, output: str = "no documents") -> list[ChatMessage]:
    """The first call read through the query; the tool ran; the workflow's conversation after the step."""
    cache.remember(reference([FIRST]), queried([FIRST]), answer, checked=False)
    cache.remember_tool_output("s", answer.tool_calls[0].id, output)
    return [FIRST, Conversation.assistant_message(answer), Conversation.tool_result(answer.tool_calls[0].id, output)]


def test_the_next_step_comes_from_memory_when_the_chain_vouches_for_it() -> None:
    cache = ConversationCache()
    conversation = after_one_step(cache, reply())
    request = cache.request_for(reference(conversation))
    assert request is not None
    assert request.messages == [SYSTEM, *conversation]
    assert request.tools == queried(conversation).tools
    assert (cache.hits, cache.misses) == (1, 0)


def test_a_retried_call_reads_the_same_messages_again() -> None:
    cache = ConversationCache()
    cache.remember(reference([FIRST]), queried([FIRST]), reply(), checked=False)
    assert cache.request_for(reference([FIRST])).messages == [SYSTEM, FIRST]


def test_whatever_the_worker_did_not_produce_is_a_miss() -> None:
    cache = ConversationCache()
    answer = reply()
    conversation = after_one_step(cache, answer)
    # A person's message joined at the step boundary.
    assert cache.request_for(reference([*conversation, ChatMessage(role="user", content="thanks")])) is None
    # The workflow renamed the call id, or recorded another text (a refusal, an approval's note).
    renamed = [FIRST, Conversation.assistant_message(reply("call_1_2")), Conversation.tool_result("call_1_2", "no documents")]
    assert cache.request_for(reference(renamed)) is None
    other_text = [*conversation[:2], Conversation.tool_result("call_1", "Refused: not offered")]
    assert cache.request_for(reference(other_text)) is None
    # Another run of the session; a reply recorded in the worker's place (a forged completion).
    assert cache.request_for(reference(conversation, run_id="run-2")) is None
    forged = [FIRST, Conversation.assistant_message(reply(query="secrets")), conversation[2]]
    assert cache.request_for(reference(forged)) is None
    assert cache.hits == 0


def test_a_tool_output_this_worker_never_saw_is_a_miss() -> None:
    cache = ConversationCache()
    answer = reply()
    cache.remember(reference([FIRST]), queried([FIRST]), answer, checked=False)
    conversation = [FIRST, Conversation.assistant_message(answer), Conversation.tool_result("call_1", "no documents")]
    assert cache.request_for(reference(conversation)) is None


def test_a_view_that_is_not_the_whole_prefix_is_never_remembered() -> None:
    cache = ConversationCache()
    note = ChatMessage(role="user", content="[3 earlier messages are in the transcript]")
    cache.remember(reference([FIRST]), queried([note, FIRST]), reply(), checked=False)  # a continued run's view
    assert cache.request_for(reference([FIRST])) is None


def offered_once_the_catalog_grows(named: list[str], added: str) -> tuple[ModelRequest | None, list[dict]]:
    """A session that named `named` takes a step; an MCP server then adds the tool `added`. What
    memory offers for the next step, and what the `model_context` query would."""
    import dataclasses

    cache = ConversationCache()
    answer = reply()
    asked = ModelRequest(messages=[SYSTEM, FIRST], tools=[spec.openai_schema() for spec in CATALOG.select(named)])
    cache.remember(reference([FIRST]), asked, answer, checked=False)
    cache.remember_tool_output("s", "call_1", "no documents")
    conversation = [FIRST, Conversation.assistant_message(answer), Conversation.tool_result("call_1", "no documents")]
    CATALOG.add(dataclasses.replace(CATALOG.get(CATALOG.names()[0]), name=added))
    try:
        return cache.request_for(reference(conversation)), [spec.openai_schema() for spec in CATALOG.select(named)]
    finally:
        CATALOG.remove(added)


def test_a_session_that_named_every_tool_is_not_offered_a_tool_added_since() -> None:
    """A session's tools are the ones it names, on a hit as through the query: a session that
    named every tool of the catalog explicitly is not "all tools" once the catalog grows
    (an MCP server that adds a tool), and must not be offered the new one."""
    request, the_query = offered_once_the_catalog_grows(CATALOG.names(), "zz_added_since")
    assert request is None or request.tools == the_query


def test_a_session_that_named_a_tool_the_catalog_lacked_is_offered_it_once_it_comes() -> None:
    """A session may name a tool no server offers yet; the query offers it as soon as an MCP
    server adds it, so a hit must not keep offering the list the first query read."""
    request, the_query = offered_once_the_catalog_grows([CATALOG.names()[0], "zz_not_yet_connected"], "zz_not_yet_connected")
    assert request is None or request.tools == the_query


def test_what_the_cache_keeps_is_bounded_in_bytes_not_only_in_entries() -> None:
    """A worker lives for weeks: 20,000 tool outputs of 64 KB and 2,000 conversations of a
    whole model window are 2 GB, more than a small worker has. Memory is a saving, not a
    store: past a few hundred megabytes the oldest entries go (and read by query)."""
    from activities.run_tool import MAX_RESULT_BYTES
    from workflows.conversation import message_bytes
    from workflows.limits import MODEL_WINDOW_BYTES

    cache = ConversationCache()
    output = "x" * (MAX_RESULT_BYTES - 100)
    for index in range(20_000):
        cache.remember_tool_output("s", f"call_{index}", output)
    big = ChatMessage(role="user", content="y" * (MODEL_WINDOW_BYTES - 1_000))
    for run in range(2_000):
        ref = reference([big], run_id=f"run-{run}")
        cache.remember(ref, queried([big]), reply(), checked=False)
    assert cache.request_for(reference([big], run_id="run-1999")) is not None  # the newest are kept
    outputs = sum(len(text) for text in cache.tool_outputs.entries.values())
    conversations = sum(message_bytes(m) for known in cache.runs.entries.values() for m in known.messages)
    assert outputs + conversations <= 400_000_000
