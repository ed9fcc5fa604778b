"""Model responses as safe HTML for the judging page: Markdown rendered by markdown-it-py (CommonMark
with tables and strikethrough; raw HTML in a response is shown as text, not parsed), then sanitised
by nh3 (an allow-list: no script, style, iframe or form, no event-handler or style attribute, links
only to http, https and mailto with ``rel="noopener nofollow noreferrer"``, images only inline
``data:image/...`` ones -- a remote image would tell a third party who reads the page and when).
Code blocks keep their text and their ``language-*`` class (for a highlighter the page may add).
"""
from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["render_markdown", "sanitize", "TAGS"]

TAGS = {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
        "blockquote", "ul", "ol", "li", "a", "img", "table", "thead", "tbody", "tr", "th", "td", "sup", "sub"}
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "ol": {"start"}, "th": {"style"},
              "td": {"style"}, "code": {"class"}}
LINK_SCHEMES = re.compile(r"^(https?:|mailto:)", re.IGNORECASE)
DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$", re.IGNORECASE)
ALIGN = re.compile(r"^text-align:(left|right|center)$")
LANGUAGE = re.compile(r"^language-[A-Za-z0-9_+#.-]{1,40}$")


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt
    # html=False: a response's own HTML is text; linkify off: no new links beyond the written ones
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def _attribute(tag, name, value):
    """Keep an allowed attribute only where its value is safe (nh3's ``attribute_filter``)."""
    if tag == "a" and name == "href":
        return value if LINK_SCHEMES.match(value.strip()) else None
    if tag == "img" and name == "src":
        return value if DATA_IMAGE.match(value.strip()) else None
    if name == "style":  # a table cell's alignment, as markdown-it writes it
        return value if ALIGN.match(value.replace(" ", "")) else None
    if tag == "code" and name == "class":
        return value if LANGUAGE.match(value) else None
    return value


def render_markdown(text: str) -> str:
    """Safe HTML of a Markdown response (module docstring).

    Parameters
    ----------
    text : str
        The response, Markdown (or plain text).

    Returns
    -------
    str
        An HTML fragment: only the tags of :data:`TAGS`, no script or event handler, links with
        ``rel="noopener nofollow noreferrer"``, images only inline ``data:image`` ones (an image
        with any other source is dropped, its alt text kept).

    Examples
    --------
    >>> render_markdown("**hi** <script>alert(1)</script>")
    '<p><strong>hi</strong> &lt;script&gt;alert(1)&lt;/script&gt;</p>\\n'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    return sanitize(_parser().render(text))


def sanitize(html: str) -> str:
    """An HTML fragment cleaned to the page's allow-list (module docstring); what
    :func:`render_markdown` applies to markdown-it's output, usable on any HTML."""
    import nh3
    html = _drop_remote_images(html)
    return nh3.clean(html, tags=TAGS, clean_content_tags={"script", "style"}, attributes=ATTRIBUTES,
                     attribute_filter=_attribute, link_rel="noopener nofollow noreferrer",
                     url_schemes={"http", "https", "mailto", "data"}, strip_comments=True)


IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
SRC = re.compile(r'\bsrc="([^"]*)"', re.IGNORECASE)
ALT = re.compile(r'\balt="([^"]*)"', re.IGNORECASE)


def _drop_remote_images(html: str) -> str:
    """markdown-it's ``<img src=... alt=...>`` of an image that is not an inline data image: its alt
    text instead (markdown-it escapes attribute values, so the alt text is already safe)."""
    def replace(match):
        tag = match.group(0)
        src = SRC.search(tag)
        if src and DATA_IMAGE.match(src.group(1).strip()):
            return tag
        alt = ALT.search(tag)
        return alt.group(1) if alt else ""
    return IMG.sub(replace, html)
