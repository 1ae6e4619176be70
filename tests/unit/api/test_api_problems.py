"""Result code -> HTTP status table, problem documents, and FTS5 query quoting."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memledger.api.problems import (
    CODE_TYPE_PREFIX,
    TYPE_PREFIX,
    Problem,
    code_name,
    http_status_for_code,
    tx_rejected,
)
from memledger.api.search import fts5_query, query_words
from memledger.protocol import codes
from memledger.protocol.codes import DESCRIPTIONS, Code
from memledger.protocol.limits import MAX_TAG_BYTES, MAX_TAGS
from tests.support.chain import LocalChain, seeded_key


@pytest.mark.parametrize("code", [c for c in Code if c != Code.OK])
def test_every_rejection_code_is_a_4xx(code: Code) -> None:
    assert 400 <= http_status_for_code(int(code)) < 500


def test_specific_statuses() -> None:
    assert http_status_for_code(Code.BAD_SIGNATURE) == 400
    assert http_status_for_code(Code.NONCE_REPLAYED) == 409
    assert http_status_for_code(Code.DOMAIN_WRITE_DENIED) == 403
    assert http_status_for_code(Code.MEMORY_NOT_FOUND) == 404
    assert http_status_for_code(Code.TX_TOO_LARGE) == 413
    assert http_status_for_code(Code.SIGNER_BACKLOG_FULL) == 429  # retried by clients
    assert http_status_for_code(Code.INVALID_TAG) == 422
    assert http_status_for_code(9999) == 422 and code_name(9999) == "unknown_9999"


def test_tx_rejection_problem_carries_code_and_name() -> None:
    body = tx_rejected(8, "", "ab" * 32).body("/v1/txs")
    assert body["status"] == 400 and body["code"] == 8 and body["name"] == "bad_signature"
    assert body["title"] == DESCRIPTIONS[Code.BAD_SIGNATURE]
    assert body["detail"] == DESCRIPTIONS[Code.BAD_SIGNATURE]
    assert body["type"] == "urn:memledger:code:bad_signature"
    assert body["hash"] == "ab" * 32 and body["instance"] == "/v1/txs"


def test_a_full_signer_backlog_says_when_to_retry() -> None:
    """A 429, like the rate limit's, carries Retry-After; other rejections do not."""
    full = tx_rejected(int(Code.SIGNER_BACKLOG_FULL), "", "ab" * 32, stage="admission")
    response = full.response("/v1/txs")
    assert response.status_code == 429 and response.headers["retry-after"] == "1"
    assert "retry-after" not in tx_rejected(8, "", "ab" * 32).response().headers


def test_problem_defaults() -> None:
    body = Problem(404, "not_found", "no memory with id 'x'").body()
    assert body == {"type": "urn:memledger:problem:not_found", "title": "Not Found",
                    "status": 404, "detail": "no memory with id 'x'", "name": "not_found"}


def test_codes_doc_names_the_problem_types_the_api_sends() -> None:
    """docs/CODES.md once promised https://memledger.dev/problems/<name> URLs."""
    doc = (Path(__file__).parents[3] / "docs" / "CODES.md").read_text()
    prose = "\n".join(line for line in doc.splitlines() if not line.startswith("|"))
    assert f"`{CODE_TYPE_PREFIX}<name>`" in prose and f"`{TYPE_PREFIX}<name>`" in prose
    assert "://" not in prose
    assert tx_rejected(2, "", "ab" * 32).type == f"{CODE_TYPE_PREFIX}tx_decode"


@pytest.mark.parametrize("text", ['a"b', "x OR y", "NEAR(a b)", "col:val", "pre*", "^start",
                                  "-neg +pos", "(paren", "a AND NOT b", 'he said ""hi""'])
def test_fts5_query_never_breaks_the_parser(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("create virtual table t using fts5(body)")
    conn.execute("insert into t(body) values (?)", (text,))
    rows = conn.execute("select body from t where t match ?", (fts5_query(text),)).fetchall()
    assert rows == [(text,)]


def test_fts5_query_without_a_word_is_none() -> None:
    assert fts5_query(" - * ") is None


def test_control_characters_separate_words() -> None:
    assert fts5_query("a\x00b\x1bc\td") == '"a" "b" "c" "d"'
    assert query_words("x\u3000y -- z") == ["x", "y", "z"]


def test_tx_rejection_detail_states_the_rule_and_the_specifics() -> None:
    """`content_too_large` used to say only "content is N bytes", not the limit."""
    body = tx_rejected(int(Code.CONTENT_TOO_LARGE), "content is 600000 bytes", "ab" * 32).body()
    assert body["detail"] == "content larger than 512 KiB: content is 600000 bytes"
    again = tx_rejected(8, DESCRIPTIONS[Code.BAD_SIGNATURE], "ab" * 32).body()
    assert again["detail"] == DESCRIPTIONS[Code.BAD_SIGNATURE]  # never said twice


@pytest.fixture()
def chain(tmp_path: Path) -> Iterator[LocalChain]:
    chain = LocalChain(tmp_path / "chain")
    yield chain
    chain.close()


def _refusal(chain: LocalChain, tx: bytes, code: Code) -> str:
    """The detail the REST API answers the real engine's refusal of `tx` with."""
    [result] = chain.block([tx])
    assert result.code == int(code), result
    return str(tx_rejected(result.code, result.log, "ab" * 32).body()["detail"])


def test_not_a_validator_says_who_votes_and_how_to_become_one(chain: LocalChain) -> None:
    """`not_a_validator` said only that the signer is not in the set (issue 34)."""
    alice = seeded_key("problems-alice")
    b = chain.builder(alice)
    chain.block([b.submit(chain.next_nonce(alice), "m-1", "Proposed, awaiting validators")])
    detail = _refusal(chain, b.vote(chain.next_nonce(alice), "m-1"), Code.NOT_A_VALIDATOR)
    assert detail.startswith("signer is not in the current validator set. Only validators "
                             "vote on a memory (on a memory in a scoped domain, the members "
                             "pinned on its ballot)"), detail
    assert ("a key becomes a validator by a governance proposal, `memledger gov propose "
            "validator --pubkey KEY --power N`, that the current validators vote through"
            ) in detail


@pytest.mark.parametrize(("tags", "code", "says"), [
    (["x" * (MAX_TAG_BYTES + 1)], Code.INVALID_TAG, "too long"),
    (["a\x00b"], Code.INVALID_TAG, "empty or too long"),
    (["t"] * 2, Code.INVALID_TAG, "duplicate tags"),
    ([f"t{i}" for i in range(MAX_TAGS + 1)], Code.TOO_MANY_TAGS, f"{MAX_TAGS + 1} tags"),
])
def test_tag_refusals_state_the_limits(chain: LocalChain, tags: list[str], code: Code,
                                       says: str) -> None:
    """`invalid_tag` said "tag '...' empty or too long" without the limit (issue 34)."""
    alice = seeded_key("problems-alice")
    tx = chain.builder(alice).submit(chain.next_nonce(alice), "m-t", "Tagged content here",
                                     tags=tags)
    detail = _refusal(chain, tx, code)
    assert says in detail
    assert detail.endswith(f". A memory takes at most {MAX_TAGS} tags, distinct, each 1 to "
                           f"{MAX_TAG_BYTES} bytes of UTF-8 of any characters but NUL "
                           "(U+0000)"), detail


def test_tag_limits_are_stated_from_the_protocol_limits() -> None:
    """One copy of each limit: the REST schema and the codes' text read limits.py."""
    import inspect
    import re

    from memledger.api import schemas

    assert schemas.MAX_TAGS == MAX_TAGS and schemas.MAX_TAG_CHARS == MAX_TAG_BYTES
    # ...by name, not by a second literal copy that would drift from limits.py
    assert not re.search(r"^MAX_TAG\w* = \d", inspect.getsource(schemas), re.MULTILINE)
    assert not re.search(r"\b(32|64) tags|\b64 bytes", inspect.getsource(codes))
    assert f"longer than {MAX_TAG_BYTES} bytes" in Code.INVALID_TAG.description
    assert Code.TOO_MANY_TAGS.description == f"more than {MAX_TAGS} tags"


def test_a_write_into_anothers_domain_says_who_can_let_it(chain: LocalChain) -> None:
    """`domain_write_denied` said only that a grant is needed, not whose."""
    alice, bob = seeded_key("problems-alice"), seeded_key("problems-bob")
    chain.block([chain.builder(alice).submit(chain.next_nonce(alice), "lab-1",
                                             "Alice's lab notes, first page", domain="lab")])
    detail = _refusal(chain, chain.builder(bob).submit(
        chain.next_nonce(bob), "lab-2", "Bob writes into Alice's lab", domain="lab"),
        Code.DOMAIN_WRITE_DENIED)
    assert detail.startswith("signer may not write into this domain: domain 'lab' needs a "
                             "write grant. A domain belongs to its first writer"), detail
    assert "its owner can grant write access (the SDK's `grant(domain, KEY)`)" in detail
    assert "shared domains (by default `general`) take anyone's writes" in detail


def test_codes_doc_names_every_code_with_a_next_step() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "CODES.md").read_text()
    prose = "\n".join(line for line in doc.splitlines() if not line.startswith("|"))
    for code in codes.NEXT_STEPS:
        assert f"`{code.slug}`" in prose, code


def test_not_a_scope_member_says_who_votes_and_how_members_change() -> None:
    """The engine refuses with the bare description (TxError(Code.NOT_A_SCOPE_MEMBER))."""
    code = Code.NOT_A_SCOPE_MEMBER
    detail = tx_rejected(int(code), code.description, "ab" * 32).body()["detail"]
    assert detail.startswith(f"{code.description}. Only the members pinned on a scoped "
                             "memory's ballot when it was proposed vote on it")
    assert "`memledger gov propose scope revise SCOPE --member KEY:WEIGHT ...`" in detail
