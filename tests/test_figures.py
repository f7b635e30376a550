"""Figures in an answer come from somewhere (gates/figures.py, gates/figure_grounding.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gates.figure_grounding import problem_detail, ungrounded
from gates.figures import Figure, figures

TRAVEL = "国际差旅住宿标准：每晚不超过 180 美元，一次出差最多报销 3 晚。"


def _read(text: str) -> list[tuple[str, str, Decimal]]:
    return [(figure.kind, figure.unit, figure.value) for figure in figures(text)]


def _said(answer: str, sources: list[str], question: str = "") -> list[str]:
    return [figure.text for figure in ungrounded(answer, sources, question)]


# ---------------------------------------------------------------------------- figures()


@pytest.mark.parametrize(
    ("text", "unit", "value"),
    [
        ("180 美元", "USD", 180),
        ("$180", "USD", 180),
        ("180 USD", "USD", 180),
        ("US$180", "USD", 180),
        ("¥300", "CNY", 300),
        ("３,０００元", "CNY", 3000),  # full-width digits and a thousands separator
        ("RMB 300", "CNY", 300),
        ("300 人民币", "CNY", 300),
        ("三百元", "CNY", 300),
        ("一千五百块", "CNY", 1500),
        ("1.5万元", "CNY", 15000),
        ("3万美元", "USD", 30000),
        ("€30", "EUR", 30),
    ],
)
def test_amounts_are_read_with_a_canonical_currency(text: str, unit: str, value: int) -> None:
    assert _read(text) == [("amount", unit, Decimal(value))]


@pytest.mark.parametrize(
    ("text", "kind", "unit", "value"),
    [
        ("3 天", "duration", "day", "3"),
        ("5 人", "count", "person", "5"),
        ("5位同事", "count", "person", "5"),
        ("两次", "count", "times", "2"),
        ("10 个", "count", "item", "10"),
        ("两晚", "count", "night", "2"),
        ("3 个工作日", "duration", "workday", "3"),
        ("2 hours", "duration", "hour", "2"),
        ("半小时", "duration", "hour", "0.5"),
        ("一个半小时", "duration", "hour", "1.5"),
        ("30 分钟", "duration", "minute", "30"),
        ("两周", "duration", "week", "2"),
        ("3个月", "duration", "month", "3"),
        ("一年半", "duration", "year", "1.5"),
        ("three nights", "count", "night", "3"),
        ("15%", "percent", "percent", "15"),
        ("15 percent", "percent", "percent", "15"),
        ("百分之十五", "percent", "percent", "15"),
        ("百分之十五点五", "percent", "percent", "15.5"),
        ("八折", "percent", "percent", "80"),
    ],
)
def test_counts_durations_and_percentages(text: str, kind: str, unit: str, value: str) -> None:
    assert _read(text) == [(kind, unit, Decimal(value))]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2026-12-05", 20261205),
        ("2026/12/5", 20261205),
        ("2026年12月5日", 20261205),
        ("二〇二六年十二月五日", 20261205),
        ("December 5, 2026", 20261205),
        ("12月5日", 1205),  # no year: 0 in its place
        ("十二月五号", 1205),
        ("12/5", 1205),
        ("5 Dec", 1205),
        ("2026年", 20260000),
    ],
)
def test_dates_in_their_formats(text: str, value: int) -> None:
    assert _read(text) == [("date", "date", Decimal(value))]


def test_times_of_day_read_in_minutes_and_either_half_of_the_day_when_unsaid() -> None:
    assert _read("下午3点") == [("time", "clock", Decimal(15 * 60))]
    assert _read("15:00") == [("time", "clock", Decimal(15 * 60))]
    assert _read("3pm") == [("time", "clock", Decimal(15 * 60))]
    assert _read("三点半") == [("time", "clock12", Decimal(3 * 60 + 30))]


def test_a_range_gives_two_figures_of_one_unit() -> None:
    assert _read("3~5 个工作日") == [
        ("duration", "workday", Decimal(3)),
        ("duration", "workday", Decimal(5)),
    ]


def test_a_plain_number_has_no_unit_and_keeps_its_place_and_spelling() -> None:
    (figure,) = figures("预算一共 1.5万，够用")
    assert figure.unit == "" and figure.value == 15000 and figure.text == "1.5万"
    text = "住宿 ３００ 美元"
    (figure,) = figures(text)
    assert text[figure.start : figure.end] == figure.text == "３００ 美元"


def test_zero_width_characters_and_bold_do_not_split_a_figure() -> None:
    assert _read("**1\u200b80 美元**") == [("amount", "USD", Decimal(180))]


@pytest.mark.parametrize(
    "text",
    [
        "1. 登录系统\n2、填写申请\n(3) 提交\n## 2.1 报销标准",  # list and heading numbers
        "提交方式：1. OA 2. 邮件 3、纸质（1）预算 2) 时间",  # markers inside a line
        "第一步，第3天，第 3.2 节，3rd",  # ordinals
        "见 #12 与 No. 5",  # references
        "请联系 138-1234-5678 或 13812345678，工号 A1023，订单号 2026120500012",  # ids, phones
        "版本 2.1.3，v1.2，1.2.3",  # versions
        "会议室 301 在 3号楼",  # places
        "TASK-12、iPhone15、5G、Q3、步骤 2、表 1",  # codes and labels
        "7×24 小时服务，24/7 支持",
        "明天、后天、下周五、周三",  # relative dates and weekdays
    ],
)
def test_what_names_or_orders_things_is_not_a_figure(text: str) -> None:
    assert figures(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "我先查一下，请再试一次，这是一个问题",  # 一 as an article
        "十分重要，万一不行，千万不要",  # numerals inside words
        "三四天，两三个",  # approximations
        "三分之一的人",  # a fraction in words
        "有3点需要注意，两点建议，快一点",  # points, not times
        "一块去吃饭",
    ],
)
def test_chinese_numerals_in_words_are_not_figures(text: str) -> None:
    assert figures(text) == []


def test_a_list_marker_does_not_hide_the_figure_after_it() -> None:
    assert _read("1. 每晚不超过 500 元\n- 3 天内提交\n1.5 小时内处理") == [
        ("amount", "CNY", Decimal(500)),
        ("duration", "day", Decimal(3)),
        ("duration", "hour", Decimal("1.5")),
    ]


def test_an_iso_timestamp_is_a_date_and_a_time_not_its_offset() -> None:
    assert _read('{"start": "2026-12-05T10:00:00+08:00"}') == [
        ("date", "date", Decimal(20261205)),
        ("time", "clock12", Decimal(600)),
    ]


# ---------------------------------------------------------------------------- ungrounded()


def test_a_figure_the_source_does_not_give_is_ungrounded() -> None:
    assert _said("住宿标准是每晚 300 美元。", [TRAVEL]) == ["300 美元"]


def test_the_figure_the_source_gives_passes() -> None:
    assert _said("住宿标准是每晚 180 美元，最多报销 3 晚。", [TRAVEL]) == []


def test_the_same_number_in_another_currency_is_ungrounded() -> None:
    assert _said("每晚不超过 180 元。", [TRAVEL]) == ["180 元"]


def test_an_answer_with_no_figures_has_nothing_ungrounded() -> None:
    assert ungrounded("住宿按公司差旅制度报销，请保留发票。", [TRAVEL]) == []


def test_a_figure_from_the_question_passes() -> None:
    question = "我要出差 4 晚，住宿怎么报？"
    assert _said("你这次 4 晚，每晚不超过 180 美元。", [TRAVEL], question) == []
    assert _said("你这次 4 晚，每晚不超过 180 美元。", [TRAVEL]) == ["4 晚"]


def test_a_figure_in_any_of_the_sources_passes() -> None:
    sources = [TRAVEL, "报销须在出差结束后 30 天内提交。"]
    assert _said("请在 30 天内提交，每晚 180 美元以内。", sources) == []


def test_chinese_numerals_equal_digits() -> None:
    assert _said("上限是三百元。", ["上限 300 元"]) == []
    assert _said("上限是 300 元。", ["上限三百元"]) == []
    assert _said("上限是四百元。", ["上限 300 元"]) == ["四百元"]


def test_wan_is_ten_thousand() -> None:
    assert _said("预算 1.5万元。", ["年度预算：15,000 元"]) == []
    assert _said("预算 1.5万元。", ["年度预算：1,500 元"]) == ["1.5万元"]


def test_currencies_in_their_spellings_are_one_currency() -> None:
    assert _said("It is $180 per night.", [TRAVEL]) == []
    assert _said("每晚 180 USD。", [TRAVEL]) == []
    assert _said("每晚 ¥180。", [TRAVEL]) == ["¥180"]


def test_english_amounts_and_counts() -> None:
    source = "Hotel cap: 180 USD per night, up to three nights."
    assert _said("The cap is $180 a night for 3 nights.", [source]) == []
    assert _said("The cap is $200 a night for 3 nights.", [source]) == ["$200"]


def test_percentages_in_their_spellings() -> None:
    source = "增值税专用发票税率为百分之六。"
    assert _said("税率是 6%。", [source]) == []
    assert _said("The rate is 6 percent.", [source]) == []
    assert _said("税率是 9%。", [source]) == ["9%"]


def test_dates_in_two_formats_match_in_the_year_the_sources_speak_of() -> None:
    assert _said("年会在 12月5日。", ["2026 年年会定于 2026-12-05 举行。"]) == []
    assert _said("年会在 2026-12-05。", ["2026 年年会定于 12月5日举行。"]) == []
    assert _said("年会在 12月6日。", ["年会定于 2026-12-05 举行。"]) == ["12月6日"]


def test_a_year_the_sources_never_name_is_not_assumed() -> None:
    assert _said("年会在 2027-12-05。", ["2026 年年会定于 12月5日举行。"]) == ["2027-12-05"]
    assert _said("年会在 2026-12-05。", ["年会定于 12月5日举行。"]) == ["2026-12-05"]


def test_a_year_is_grounded_by_a_date_in_that_year() -> None:
    assert _said("这是 2026 年的安排。", ["年会定于 2026-12-05 举行。"]) == []


def test_durations_compare_in_one_measure() -> None:
    source = "审批一般需要 3 个工作日；会议室最长预订 2 小时。"
    assert _said("审批要 3 个工作日，会议室最多订 120 分钟。", [source]) == []
    assert _said("审批要 3 天。", [source]) == ["3 天"]  # working days are not days
    assert _said("会议室最多订半小时。", [source]) == ["半小时"]


def test_a_time_of_day_from_the_question_passes_in_another_spelling() -> None:
    assert _said("好的，15:00 的会。", [], "下午3点的会改到哪了？") == []
    assert _said("好的，16:00 的会。", [], "下午3点的会改到哪了？") == ["16:00"]


def test_a_plain_number_matches_a_figure_of_any_unit_with_that_number() -> None:
    assert _said("最多报销 3。", [TRAVEL]) == []
    assert _said("最多报销 4。", [TRAVEL]) == ["4"]


def test_a_tools_plain_numbers_ground_figures_with_units() -> None:
    result = '{"hotel": "Hilton", "rate": 180, "currency": "USD", "nights": 2}'
    assert _said("希尔顿每晚 180 美元，共 2 晚。", [result]) == []


def test_list_markers_and_ids_in_the_answer_need_no_source() -> None:
    answer = "1. 登录 OA（工号 A1023）\n2. 按 #12 的说明填写\n3. 提交后拨打 138-1234-5678"
    assert ungrounded(answer, [TRAVEL]) == []


# ---------------------------------------------------------------------------- computations


def test_a_shown_computation_from_grounded_figures_passes() -> None:
    sources = ["住宿每晚 180 美元", "本次出差 2 晚"]
    assert _said("180 美元 × 2 晚 = 360 美元", sources) == []
    assert _said("180*2=360", sources) == []
    assert _said("180 美元/晚 × 2 晚 = 360 美元", sources) == []


def test_a_wrong_computation_is_ungrounded() -> None:
    assert _said("180 × 2 = 380", ["住宿每晚 180 美元，共 2 晚"]) == ["380"]


def test_a_computation_from_an_ungrounded_operand_gives_nothing() -> None:
    assert _said("180 × 4 = 720", ["住宿每晚 180 美元，共 2 晚"]) == ["4", "720"]


def test_a_results_later_mention_is_the_computations() -> None:
    sources = ["房费 180 元，餐费 120 元"]
    assert _said("合计 180+120=300，共 300 元。", sources) == []
    assert _said("共 300 元。", sources) == ["300 元"]


def test_a_result_is_an_operand_of_the_next_step() -> None:
    sources = ["房费每晚 180 元，共 2 晚，餐费 120 元"]
    assert _said("180 × 2 = 360，360 + 120 = 480 元", sources) == []
    assert _said("180 × 2 = 360，360 + 120 = 490 元", sources) == ["490 元"]


def test_a_percentage_rounded_to_its_shown_precision_passes() -> None:
    sources = ["原价 180 元，现价 300 元"]
    assert _said("涨幅 (300-180)/180 ≈ 66.7%", sources) == []
    assert _said("涨幅 (300-180)/180 × 100% ≈ 66.67%", sources) == []
    assert _said("涨幅 (300-180)/180 ≈ 67.7%", sources) == ["67.7%"]


def test_a_computation_in_words_and_full_width_signs() -> None:
    sources = ["每人补贴 50 元，共 6 人"]
    assert _said("50 元乘以 6 人等于 300 元", sources) == []
    assert _said("５０×６＝３００", sources) == []


def test_parentheses_around_a_remark_do_not_break_its_computation() -> None:
    assert _said("共 360 美元（180 × 2 = 360）", ["每晚 180 美元，2 晚"]) == []


def test_figures_beside_a_computation_are_still_checked() -> None:
    sources = ["住宿每晚 180 美元，共 2 晚"]
    assert _said("180 × 2 = 360，另加 50 美元杂费", sources) == ["50 美元"]


# ---------------------------------------------------------------------------- problem_detail()


def test_the_detail_names_the_figure_and_the_sources_figures() -> None:
    found = ungrounded("住宿标准是每晚 300 美元。", [TRAVEL])
    assert problem_detail(found, [TRAVEL]) == "says 300 美元; the sources say 180 美元, 3 晚"


def test_the_detail_lists_each_figure_once_same_kinds_first() -> None:
    sources = ["报销须在 30 天内提交。", TRAVEL]
    found = ungrounded("每晚 300 美元，300 美元以内都行。", sources)
    assert len(found) == 2
    assert problem_detail(found, sources) == (
        "says 300 美元; the sources say 180 美元, 30 天, 3 晚"
    )


def test_the_detail_says_when_the_sources_give_no_figures() -> None:
    found = [Figure("300 美元", "amount", "USD", Decimal(300))]
    assert problem_detail(found, ["请保留发票。"]) == "says 300 美元; the sources give no figures"
