"""Every Python str round-trips exactly through PostgreSQL, NUL characters and lone surrogates
included (which text and jsonb columns cannot hold), and distinct strings stay distinct."""

from __future__ import annotations

import anyio
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pai.core import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from pai.core.ext import ThreadRecord
from pai.storage_postgres import PostgresStorage
from pai.storage_postgres.testing import TestSchemas

ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()))
"""Any str: NUL, lone surrogates, astral characters."""


@pytest.fixture(scope="module")
def schema_url(postgres_url: str) -> object:
    with TestSchemas(postgres_url) as schemas:
        yield postgres_url, schemas.fresh()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(thread_id=ANY_TEXT.filter(bool), scope=ANY_TEXT, text=ANY_TEXT, key=ANY_TEXT)
def test_any_string_round_trips_exactly_in_ids_scopes_and_messages(
    schema_url: tuple[str, str], thread_id: str, scope: str, text: str, key: str
) -> None:
    url, schema = schema_url
    messages = [
        UserMessage(content=text),
        AssistantMessage(
            content=text, tool_calls=(ToolCall(id=text, name=text, arguments={key: text}),)
        ),
        ToolResultMessage(tool_call_id=text, tool_name=text, content=text, output={key: [text]}),
    ]

    async def round_trip() -> None:
        storage = PostgresStorage(url, schema=schema, pool_min_size=0)
        try:
            record = ThreadRecord(id=thread_id, scope_key=scope, agent_name=text)
            await storage.create_thread(record)
            try:
                assert await storage.get_thread(thread_id) == record
                assert list(await storage.list_threads(scope)) == [record]
                await storage.append_messages(thread_id, messages)
                assert list(await storage.get_messages(thread_id)) == messages
            finally:
                assert list(await storage.delete_thread(thread_id)) == [thread_id]
        finally:
            await storage.aclose()

    anyio.run(round_trip)


@pytest.mark.anyio
async def test_ids_are_stored_as_their_exact_bytes_and_stay_indexed(
    postgres_url: str, schemas: TestSchemas
) -> None:
    schema = schemas.fresh()
    storage = PostgresStorage(postgres_url, schema=schema)
    try:
        await storage.create_thread(ThreadRecord(id="a\x00\ud800", scope_key="s", agent_name="x"))
    finally:
        await storage.aclose()
    with psycopg.connect(postgres_url) as conn:
        (stored,) = conn.execute(f'SELECT id FROM "{schema}".threads'.encode()).fetchone() or (
            None,
        )
        plan = "\n".join(
            str(row[0])
            for row in conn.execute(
                f'EXPLAIN SELECT 1 FROM "{schema}".threads WHERE id = %s'.encode(), (b"a",)
            ).fetchall()
        )
    assert stored == b"a\x00\xed\xa0\x80"
    assert "threads_pkey" in plan, f"a lookup by id does not use the index:\n{plan}"
