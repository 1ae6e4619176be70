"""/docs and /redoc render with no network: every URL the pages load is served by the node.

FastAPI's default pages load Swagger UI / ReDoc from a CDN, so on a machine without
network /docs is blank (issue 18, point 12). Here every `src`/`href`/`url` the pages
reference, and every URL the page scripts fetch at start-up (the OpenAPI document), must
be a same-origin path that answers 200 with a non-empty body of the right kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memledger.api import ApiSettings, create_app

# Attribute URLs in the HTML, and the url/openapi_url/spec-url strings in its inline script.
_ATTR = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)
_SCRIPT_URL = re.compile(r"""(?:url|spec-url)\s*[:=]\s*["']([^"']+)["']""", re.I)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = Path(tmp_path_factory.mktemp("docs")) / "p.db"
    settings = ApiSettings(db_url=f"sqlite:///{db}", rpc_url="http://127.0.0.1:9",
                           chain_id="x")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def _referenced(html: str) -> list[str]:
    return sorted(set(_ATTR.findall(html)) | set(_SCRIPT_URL.findall(html)))


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_page_references_only_local_assets(api: TestClient, page: str) -> None:
    resp = api.get(page)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
    urls = _referenced(resp.text)
    assert any(u.endswith(".js") for u in urls), urls  # the UI bundle itself
    assert "/openapi.json" in urls, urls
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), f"{page} loads {url} remotely"
        asset = api.get(url)
        assert asset.status_code == 200, (url, asset.status_code)
        assert len(asset.content) > 100, url
        kind = asset.headers["content-type"]
        if url.endswith(".js"):
            assert "javascript" in kind, (url, kind)
        elif url.endswith(".css"):
            assert kind.startswith("text/css"), (url, kind)
    assert "cdn." not in resp.text and "googleapis" not in resp.text


def test_swagger_bundle_is_a_version_that_renders_openapi_31(api: TestClient) -> None:
    """Swagger UI 4 shows 'unable to render' for OpenAPI 3.1, which FastAPI emits."""
    assert api.get("/openapi.json").json()["openapi"].startswith("3.1")
    bundle = api.get("/docs/assets/swagger-ui-bundle.js").text
    versions = re.findall(r'"(\d+)\.(\d+)\.(\d+)"', bundle)
    assert any(int(major) >= 5 for major, _, _ in versions)


def test_docs_routes_stay_out_of_the_openapi_document(api: TestClient) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith(("/docs", "/redoc"))]
