"""Responses rendered as Markdown and sanitised: hostile inputs (scripts, event handlers, javascript:
and data: links, remote and SVG images, iframes, styles) come out inert; code blocks keep their text."""
import re
from html.parser import HTMLParser

import pytest

from study.online.service.render import TAGS, render_markdown, sanitize

HOSTILE_MARKDOWN = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "<javascript:alert(1)>",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![a](https://evil.example/track.png)",
    "![a](//evil.example/track.png)",
    "![a](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "[r]: javascript:alert(1)\n\n[click][r]",
    "<iframe src=https://evil.example></iframe>",
    "<a href='https://ok.example' onclick='steal()'>z</a>",
    '<div style="background:url(https://evil.example/x)">x</div>',
]
HOSTILE_HTML = [
    '<p onmouseover="alert(1)">x</p>',
    '<img src="https://evil.example/x.png" alt="pixel">',
    '<img src="data:image/svg+xml,<svg onload=alert(1)>">',
    '<a href="javascript:alert(1)">x</a>',
    '<svg><script>alert(1)</script></svg>',
    '<form action="https://evil.example"><input name=p></form>',
    '<style>body{display:none}</style>',
    '<object data="x.swf"></object><embed src="x.swf">',
    '<math><mi xlink:href="javascript:alert(1)">x</mi></math>',
    '<td style="position:fixed;top:0">x</td>',
    '<code class="x onclick=alert(1)">y</code>',
]


class Tags(HTMLParser):
    """The real tags and attributes of an HTML fragment (escaped text is text, not a tag)."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def inert(html):
    for tag, attrs in Tags(html).tags:
        assert tag in TAGS, (tag, html)
        for name, value in attrs.items():
            assert not name.startswith("on") and "javascript:" not in (value or "").lower(), html
            assert name in {"href", "title", "src", "alt", "start", "style", "class", "rel"}, (name, html)
        if "src" in attrs:
            assert re.match(r"data:image/(png|jpeg|gif|webp);base64,", attrs["src"]), html
        if "href" in attrs:
            assert re.match(r"(https?:|mailto:)", attrs["href"]) and attrs["rel"] == "noopener nofollow noreferrer"
        if "style" in attrs:
            assert re.fullmatch(r"text-align:(left|right|center)", attrs["style"]), html


@pytest.mark.parametrize("text", HOSTILE_MARKDOWN)
def test_hostile_markdown_comes_out_inert(text):
    inert(render_markdown(text))


@pytest.mark.parametrize("html", HOSTILE_HTML)
def test_the_sanitiser_alone_makes_hostile_html_inert(html):
    inert(sanitize(html))


def test_remote_images_are_dropped_keeping_their_alt_text_and_inline_images_kept():
    assert render_markdown("see ![a chart](https://evil.example/c.png)") == "<p>see a chart</p>\n"
    kept = render_markdown("![dot](data:image/png;base64,iVBORw0KGgo=)")
    assert '<img src="data:image/png;base64,iVBORw0KGgo=" alt="dot">' in kept


def test_links_get_rel_noopener_nofollow():
    html = render_markdown("[docs](https://example.org/a?b=1)")
    assert html == '<p><a href="https://example.org/a?b=1" rel="noopener nofollow noreferrer">docs</a></p>\n'


def test_code_blocks_keep_their_text_and_language():
    text = "```python\nif a < b and c > d:\n    print(\"<script>\")  # & more\n```\n\nand `x<y`"
    html = render_markdown(text)
    assert ('<pre><code class="language-python">if a &lt; b and c &gt; d:\n    print("&lt;script&gt;")  '
            "# &amp; more\n</code></pre>") in html
    assert "<code>x&lt;y</code>" in html
    assert render_markdown("```bad lang onclick=x\ny\n```") == '<pre><code class="language-bad">y\n</code></pre>\n'
    assert render_markdown('```x"onclick="alert(1)\ny\n```').startswith("<pre><code>y")  # not a language name


def test_markdown_structure_survives():
    html = render_markdown("# T\n\n- **a**\n- ~~b~~\n\n| x | y |\n|:-|-:|\n| 1 | 2 |\n\n> q\n\n1. one")
    for tag in ("<h1>", "<li><strong>a</strong></li>", "<s>b</s>", "<table>", '<td style="text-align:right">2</td>',
                "<blockquote>", "<ol>"):
        assert tag in html, (tag, html)


def test_not_text_is_refused():
    with pytest.raises(TypeError, match="text must be a string"):
        render_markdown(None)
