"""The 32-word bound of a full-text query counts the words the search splits: a query
whose words are separated by NBSP, U+3000 or any other Unicode whitespace passed the
route's pattern (which took only U+0000..U+0020 for separators) as one word, then was
split by str.split() into hundreds of search terms."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from memledger.api import ApiSettings, create_app
from memledger.api.problems import Problem
from memledger.api.schemas import MAX_QUERY_WORDS, QUERY, QUERY_SEPARATORS
from memledger.api.search import check_query, query_words, split_query
from tests.support.chain import LocalChain

SEPARATORS = [chr(c) for c in range(sys.maxunicode + 1) if c <= 0x20 or chr(c).isspace()]


def test_the_separators_are_what_str_split_splits_on() -> None:
    one = re.compile(f"[{QUERY_SEPARATORS}]")
    assert [chr(c) for c in range(sys.maxunicode + 1) if one.fullmatch(chr(c))] == SEPARATORS


@given(st.lists(st.sampled_from(["w", "é", "x1", "--", *SEPARATORS]), max_size=80))
def test_the_pattern_bounds_the_words_the_search_splits(parts: list[str]) -> None:
    text = "".join(parts)
    assert (re.fullmatch(QUERY, text) is not None) == (len(split_query(text)) <= 32)
    assert query_words(text) == [w for w in split_query(text) if any(c.isalnum() for c in w)]


@pytest.mark.parametrize("sep", ["\u00a0", "\u3000", "\u2009", "\x85", " "])
def test_check_query_counts_unicode_separated_words(sep: str) -> None:
    check_query(sep.join(["w"] * MAX_QUERY_WORDS))
    with pytest.raises(Problem) as err:
        check_query(sep.join(["w"] * (MAX_QUERY_WORDS + 1)))
    assert err.value.name == "invalid_query" and "33 words" in err.value.detail


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    chain = LocalChain(tmp_path_factory.mktemp("qwords"))
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client
    chain.close()


@pytest.mark.parametrize("sep", ["\u00a0", "\u3000", "\u2028", " "])
@pytest.mark.parametrize("mode", ["words", "text"])
def test_the_route_refuses_33_words_however_separated(api: TestClient, sep: str,
                                                      mode: str) -> None:
    ok = api.get("/v1/memories", params={"q": sep.join(["w"] * 32), "mode": mode})
    assert ok.status_code == 200, ok.text
    over = api.get("/v1/memories", params={"q": sep.join(["w"] * 33), "mode": mode})
    assert over.status_code == 422 and over.json()["name"] == "invalid_query"
    assert over.json()["detail"].startswith("q has 33 words; at most 32")
    assert over.headers["content-type"].startswith("application/problem+json")
