"""Images in Markdown (gates/images.py): what a message embeds, and only DingTalk media passes."""

from __future__ import annotations

import pytest

from gates.images import (
    embedded_images,
    foreign_images,
    is_dingtalk_media,
    source_of,
)
from gates.open_images import OPEN_IMAGE_CHARS, open_image_start

MEDIA = "@lADPDe7s2ySi18PNA6XNBXg"  # as the upload answers (../shared/dingtalk-workspace-apis.md)
PIXEL = "https://tracker.example/p.gif?u=u1&t=1767225600"


@pytest.mark.parametrize(
    ("markdown", "found"),
    [
        (f"看这里 ![]({PIXEL}) 谢谢", [PIXEL]),
        (f'![图](<{PIXEL}> "标题")', [PIXEL]),
        ("![a](https://h.example/a(1).png 'title')", ["https://h.example/a(1).png"]),
        ("![a b [c]](//cdn.example/x.png)", ["//cdn.example/x.png"]),
        ("![a](\n  https://h.example/x.png\n)", ["https://h.example/x.png"]),
        # a reference, collapsed or shortcut, with its definition anywhere (labels fold)
        ("![a][r]\n\n[r]: https://h.example/r.png", ["https://h.example/r.png"]),
        ("![A b][]\n\n[a  B]: <https://h.example/c.png> 'x'", ["https://h.example/c.png"]),
        ("![Logo]\n\n> [logo]:\n>   https://h.example/l.png", ["https://h.example/l.png"]),
        # HTML: quoted or not, uppercase, not yet closed (a streamed frame), srcset
        ('<img src="https://h.example/1.png" alt="x">', ["https://h.example/1.png"]),
        ("<IMG/SRC=https://h.example/2.png>", ["https://h.example/2.png"]),
        ('text <img alt="x" src="https://h.example/3.png', ["https://h.example/3.png"]),
        (
            '<img srcset="https://a.example/1.png 1x, https://b.example/2.png 2x">',
            ["https://a.example/1.png", "https://b.example/2.png"],
        ),
        ("<img src='data:image/gif;base64,R0lGOD'>", ["data:image/gif;base64,R0lGOD"]),
        # what a renderer decodes before it fetches: entities, backslash escapes
        ("![](https&#58;//h.example/e.png)", ["https://h.example/e.png"]),
        ("![](https://h.example/a\\_b.png)", ["https://h.example/a_b.png"]),
        # a parenthesis never closed, a space in the address: a lenient renderer shows it
        ("![](https://h.example/open.png", ["https://h.example/open.png"]),
        ("![](https://h.example/a b.png)", ["https://h.example/a"]),
        (f"![图]({MEDIA})", [MEDIA]),
        (f"[![图]({MEDIA})](https://h.example/page)", [MEDIA]),
    ],
)
def test_every_way_markdown_embeds_an_image_is_found(markdown: str, found: list[str]) -> None:
    assert embedded_images(markdown) == found


@pytest.mark.parametrize(
    "markdown",
    [
        "[报销制度](https://h.example/policy) 和 <https://h.example/faq>",  # links, not images
        "![a][nowhere]",  # no definition: shown as written
        "\\![a](https://h.example/x.png)",  # escaped
        "![a]() and ![b](<>)",  # nothing to fetch
        "![unclosed alt(https://h.example/x.png)",
        "用 `![](https://h.example/x.png)` 嵌入图片",
        "``![](https://h.example/x.png) with ` inside``",
        "```markdown\n![](https://h.example/x.png)\n```\n正文",
        "```\nnever closed, so code to the end\n![](https://h.example/x.png)",
        "纯文本 a<b 时",
    ],
)
def test_links_code_and_what_is_no_image_embed_nothing(markdown: str) -> None:
    assert embedded_images(markdown) == []


@pytest.mark.parametrize(
    "markdown",
    [
        # HTML outranks code: a tag's attribute may open what looks like a code span
        '<a title="`">x</a> ![](https://h.example/x.png) `',
        # an HTML block's lines are no fence: the fence seen here is not one
        "<div>\n```\n</div>\n\n![](https://h.example/x.png)\n```",
        # a backtick in the address itself: the address is read before any code span
        "![](https://h.example/p.gif?x=`) and a stray `",
        # an escaped backtick opens no code span
        "\\`![](https://h.example/x.png)\\`",
        # so HTML anywhere makes nothing code, even a tag that is inside a fence
        "~~~~\n<img src=https://h.example/x.png>\n~~~~",
        # a fence's closing line must be the same character, at most three spaces in
        "```\ncode\n~~~\n```\n![](https://h.example/x.png)",
        "```\ncode\n    ```\n```\n![](https://h.example/x.png)",
        # a fence in a list item ends with the item: the image after it is shown
        "- item\n  ```\n  code\n![](https://h.example/x.png)",
        # so any fence not in the first column makes no fence count, even one that would
        "  ```\n![](https://h.example/x.png)\n  ```",
        # a code span's backtick claimed by a link's address, an escape, a table cell
        "[t](https://a.example/`) ![](https://h.example/x.png) `",
        "\\\\`a` ![](https://h.example/x.png) `",
        "| `a | ![](https://h.example/x.png) ` |\n|---|---|",
        # a span across lines, or two in a paragraph: which backticks pair is not sure
        "a `b\nc ` ![](https://h.example/x.png) `",
        "`a` ![](https://h.example/x.png) `b`",
    ],
)
def test_code_hides_an_image_only_where_a_renderer_would_agree(markdown: str) -> None:
    assert foreign_images(markdown) == ["h.example"]


def test_only_a_dingtalk_media_id_is_dingtalk_media() -> None:
    assert is_dingtalk_media(MEDIA)
    assert is_dingtalk_media("@lA" + "x-_9" * 6)  # base64url, as the fake's uploads are
    for other in (
        "https://static.dingtalk.com/media/x.png",  # no DingTalk media host in the docs
        "//oapi.dingtalk.com/x.png",
        "data:image/png;base64,iVBORw0KGgo=",
        "lADPDe7s2ySi18PNA6XNBXg",  # without its "@"
        "@lADPDe7s2ySi18PNA6XNBXg/../x",
        "@lA.tracker.example",
        "@lA",
        "p.gif",
        "",
    ):
        assert not is_dingtalk_media(other), other


def test_foreign_images_name_the_host_once_and_never_the_query() -> None:
    text = (
        f"![]({PIXEL}) ![](https://Tracker.Example:8443/q?email=a@b.example)"
        f" ![](//cdn.example/x.png) <img src=data:image/png;base64,AA> ![]({MEDIA})"
        " ![](https://user:pw@auth.example/p) ![](relative/p.gif) ![](javascript:alert(1))"
    )
    assert foreign_images(text) == [
        "tracker.example",
        "cdn.example",
        "a data: URI",
        "auth.example",
        "an address that is not a media id",
        "a javascript: address",
    ]
    assert foreign_images(f"![图]({MEDIA}) 和 [链接](https://h.example)") == []
    assert source_of("https:\\\\back.example\\p.gif") == "back.example"
    assert source_of("http://[::1") == "an address that is not a media id"


@pytest.mark.parametrize(
    "tail",
    [
        "!",
        "![",
        "![流程",
        "![流程]",
        "![流程] ",
        "![流程](",
        "![流程](\n  ",
        "![流程](@",
        "![流程](@l",
        "![流程](@lADPDe7s",
        "![流程](<@lADP",
        "![流程](https://tracker.exa",  # foreign, but its host is not known yet
        "![流程](@lADP\\",  # an escape cut in half
        "![流程][r",
        "<",
        "<im",
        "<IMG",
        '<img src="@lA',
        f'<img src="{MEDIA}" ',
        "<img src=https://trac",
        f'<img srcset="{MEDIA} 1x, @l',
        "[r]: @lA",
        "[r]:\n  https://trac",
        "![外 ![内](https://h.example/x.png) 还在写",  # an image in unfinished alt text waits
    ],
)
def test_a_stream_ending_inside_an_image_is_held_from_where_the_image_begins(tail: str) -> None:
    text = f"报销流程见下图：\n\n{tail}"
    assert open_image_start(text) == len("报销流程见下图：\n\n")


@pytest.mark.parametrize(
    "text",
    [
        "没有图片",
        "Great! 好",
        f"![图]({MEDIA})",
        f"![图]({MEDIA}) 按图提交",
        f"![图]({MEDIA} ",  # the address has ended: judged as it is
        f'![图]({MEDIA} "标题',
        "![图](https://tracker.example/p.gif ",
        "![图](<https://tracker.example/p.gif>",
        "![图](<https://tracker.example/\n",
        "![图][r]",
        "![图] 和文字",
        "\\!",
        "a < b",
        "<b",
        "<imgs",
        '<img src="https://tracker.example/p.gif"',  # foreign already, whatever follows
        "<img src=https://tracker.example/p.gif ",
        '<img srcset="https://a.example/1.png 1x, @l',
        f'<img src="{MEDIA}">',
        "[r]: https://tracker.example/p.gif ",
        "[注意]:今天下午三点",  # prose, not an address
        "![](" + "a" * 600,  # as much as is ever read of an address
        "![" + "说明" * OPEN_IMAGE_CHARS,  # begun too far back
    ],
)
def test_a_finished_image_or_none_is_not_held(text: str) -> None:
    assert open_image_start(text) is None


def test_every_beginning_of_an_image_is_held_and_the_whole_released() -> None:
    for whole in (f"见图 ![流程图]({MEDIA}) 好", f'见图 <img src="{MEDIA}" alt="流程"> 好'):
        end = whole.index(" 好")
        for cut in range(len("见图 ") + 1, end):
            assert open_image_start(whole[:cut]) == len("见图 "), whole[:cut]
        assert open_image_start(whole[: end + 1]) is None
