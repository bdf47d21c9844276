"""The API's documentation pages load everything from the project itself: no CDN, no outside
host, so they work offline. Browser-free: the HTML's references, and each local asset served."""

import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

DOCS_PAGES = ["/api/docs", "/api/v1/docs/"]


class References(HTMLParser):
    """Every URL a page makes the browser load or link to: src, href, and URLs in its text."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]

    def handle_data(self, data: str) -> None:
        # Inline scripts and settings: any absolute URL, or a protocol-relative one.
        self.urls += re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", data)


def references(html: str) -> list[str]:
    parser = References()
    parser.feed(html)
    return parser.urls


@pytest.mark.parametrize("path", DOCS_PAGES)
def test_the_docs_page_references_no_external_host(path):
    client = Client()
    page = client.get(path)
    assert page.status_code == 200
    urls = references(page.content.decode())
    assert any(url.endswith(".js") for url in urls)  # the page does load its scripts
    external = [url for url in urls if urlsplit(url).netloc]
    assert external == []
    for url in urls:
        if url.startswith("/static/"):
            asset = client.get(url)
            assert asset.status_code == 200, url
            asset.close()


def test_the_parser_finds_a_cdn_reference():
    """The check above would see the pages as django-ninja renders them without its app."""
    html = (
        '<link href="https://cdn.jsdelivr.net/npm/swagger-ui-dist/swagger-ui.css">'
        "<script>const u = '//unpkg.com/redoc';</script>"
    )
    assert [urlsplit(u).netloc for u in references(html)] == ["cdn.jsdelivr.net", "unpkg.com"]
