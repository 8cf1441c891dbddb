"""Text a user did not type (memories, model answers, tool results) shown as text, never as markup.

Markdown and HTML panes would render ``![x](https://host/?q=secret)`` as an image the browser fetches, or
``<a href>`` as a link: :func:`literal_markdown` escapes both so a Markdown pane shows the characters;
:func:`literal_html` is the text in an HTML block that keeps its line breaks.
"""

from __future__ import annotations

import html
import re

# what could make markup of it: emphasis, code, links and images, tables, strike-through (a line that
# starts a list or a heading stays harmless text; escaping "." would cut URLs that the pane links)
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()!|~])")


def literal_markdown(text: str) -> str:
    """``text`` for a Markdown pane: HTML escaped, Markdown's punctuation backslash-escaped."""
    return _MARKDOWN.sub(r"\\\1", html.escape(text or "", quote=False))


def literal_html(text: str, css_class: str = "") -> str:
    """``text`` as an HTML block: escaped, its line breaks kept."""
    return (f'<div class="{html.escape(css_class)}" style="white-space: pre-wrap">'
            f"{html.escape(text or '')}</div>")
