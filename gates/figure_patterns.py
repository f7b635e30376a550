"""The patterns that find figures in text, each with the handler that reads its value (for
``gates/figures.py``; what is and is not a figure is said there). The handlers are in
``gates/figure_values.py``."""

from __future__ import annotations

import re
from collections.abc import Callable

from gates.figure_numbers import _CN_CHARS
from gates.figure_values import (
    EN_NUMBER,
    MONTH_NAMES,
    Rows,
    ampm_time,
    bare,
    cn_time,
    colon_time,
    day,
    discount,
    english_date,
    english_half,
    english_words,
    half,
    month,
    month_day,
    per_cent_cn,
    prefixed,
    skip,
    slash,
    span,
    with_unit,
    year,
    ymd,
)

# ---------------------------------------------------------------------------- patterns

_CN = f"[{_CN_CHARS}]+"
# A numeral starts where a number starts: not inside 第十五, 周三, 初五, 3.5 or A12.
_CN_AT = f"(?<![第周期拜初礼星{_CN_CHARS}0-9])"
_DIGIT_AT = r"(?<![0-9.,A-Za-z_周期拜])"
_DIG = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"
_MAG = (
    r"(?:\s*(?:千万|百万|万|亿|千|百)(?!分之)|[kK](?![A-Za-z])"
    r"|\s+(?:thousand|million|billion)(?![A-Za-z]))"
)
_NUM = f"(?:{_DIGIT_AT}{_DIG}{_MAG}?|{_CN_AT}{_CN})"
_MD = f"(?:(?<![0-9.])[0-9]{{1,2}}|{_CN_AT}[一二三四五六七八九十]{{1,3}})"  # a month or day

_CUR_AFTER = (
    r"(?:元人民币|人民币|美元|美金|欧元|英镑|港币|港元|日元|块钱|块(?!儿)|元(?![素件器旦宵气老首])"
    r"|圆|円|(?i:usd|cny|rmb|eur|gbp|hkd|jpy|dollars?|bucks|yuan|euros?|yen)(?![A-Za-z]))"
)
_CUR_BEFORE = r"(?:(?<![A-Za-z])(?:US\$|HK\$|USD|HKD|RMB|CNY|EUR|GBP|JPY)|\$|¥|￥|€|£)"
_PCT = r"(?:%|个百分点|(?i:percent|per\s+cent|pct)(?![A-Za-z]))"
_DUR = (
    r"(?:个?工作日|个?小时|个?钟头|分钟|秒钟?|天|日(?![期常程志报元])|个?星期(?![一二三四五六日天])"
    r"|个?礼拜(?![一二三四五六日天])|周(?![一二三四五六日末天年岁])|个月|年(?![级纪度龄轻])"
    r"|(?i:(?:business|working)\s+days?|days?|hours?|hrs?|h|minutes?|mins?|seconds?|secs?"
    r"|weeks?|months?|years?|yrs?)(?![A-Za-z]))"
)
_COUNT = (
    r"(?:人次|个人|人(?!民币)|位|名(?![称字单义额])|次|回(?![复答来去到家应])|遍|间夜|晚|夜|个|项|件"
    r"|条|份|张|台|套|间|本|篇|家|种|类|笔|批|轮|场|门|页|楼|层|周岁|岁|辆|瓶|箱|盒|支|只"
    r"|(?i:people|persons?|pax|guests?|times|nights?|items?|employees?|members?|floors?)"
    r"(?![A-Za-z]))"
)
_PERIOD = r"(?:上午|早上|早晨|清晨|凌晨|今早|明早|中午|下午|傍晚|晚上|夜里|夜间|今晚|明晚)"
_AMPM = r"(?i:a\.m\.|p\.m\.|am|pm)(?![A-Za-z])"
_MONTH = (
    "(?:" + "|".join(MONTH_NAMES) + "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)"
    r"\.?(?![A-Za-z])"
)
_UNITS_ANY = f"(?:{_CUR_AFTER}|{_PCT}|{_DUR}|{_COUNT})"
_ID_WORDS = (
    r"(?:工号|编号|单号|订单号?|工单号?|流水号|账号|帐号|卡号|电话|手机号?|分机号?|座机|邮编|尾号"
    r"|发票号码?|身份证号?|学号|房间号?|会议室|微信号?|编码|代码|批次号?"
    r"|(?<![A-Za-z])(?:ID|Id|id|QQ|qq|No\.?|NO\.?))"
)

# In order: at any place the first rule that matches wins, so what is not a figure (an id,
# a list marker) is taken before the numbers inside it could be read as figures.
_RULE_LIST: list[tuple[str, str, Callable[[re.Match[str]], Rows]]] = [
    ("url", r"https?://\S+|www\.\S+|[A-Za-z0-9._+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+", skip),
    (
        "marker",  # 1. 2、 (3) 4) ## 2.1 at the start of a line
        r"^[ \t>]*(?:#{1,6}[ \t]*)?(?:[-*+•·][ \t]*)?(?:[(][0-9]{1,3}[)]"
        r"|[0-9]{1,3}(?:\.[0-9]{1,3})*[.、):](?![0-9])"
        rf"|[0-9]{{1,3}}(?:\.[0-9]{{1,3}})+(?=[ \t])(?![ \t]*{_UNITS_ANY}))",
        skip,
    ),
    (
        "enum",  # …：(1) 预算 2) 时间 3. 地点, inside a line
        r"[(][0-9]{1,2}[)](?!\s*[/×*+\-=≈÷])"
        r"|(?<![^\s，,；;:。、])[0-9]{1,2}(?:[)](?!\s*[/×*+\-=≈÷)])|[.、](?![0-9])(?=\s*[^\s0-9]))",
        skip,
    ),
    (
        "ordinal",
        rf"第\s*(?:[0-9]+(?:\.[0-9]+)*|[{_CN_CHARS}]+)|(?<![0-9])[0-9]+(?:st|nd|rd|th)(?![A-Za-z])|#[0-9]+",
        skip,
    ),
    (
        "label",  # 步骤 2, 表 1, Step 3, Q3
        r"(?:步骤|方案|选项|附件|附录|(?<![\u4e00-\u9fff])[图表]"
        r"|(?<![A-Za-z])(?:Step|step|STEP|Option|option|Table|table|Figure|figure|Fig\.|fig\."
        r"|Section|section|Chapter|chapter|Appendix|Part|part|Q|P))\s*[0-9]+(?:\.[0-9]+)*(?![0-9])",
        skip,
    ),
    (
        "id",
        rf"{_ID_WORDS}[\"']?\s*(?:[:#=]|为|是)?\s*[\"']?[A-Za-z0-9][A-Za-z0-9-]*",
        skip,
    ),
    ("place", rf"{_NUM}\s*号(?=[楼线门口床位房厅馆室台桌院码]|会议室)", skip),
    (
        "utc_offset",  # the +08:00 of 2026-12-05T10:00:00+08:00 is no time of day
        r"(?<=:[0-9]{2}:[0-9]{2})(?:[+-][0-9]{2}:?[0-9]{2})"
        r"|(?<=:[0-9]{2}:[0-9]{2}\.[0-9]{3})(?:[+-][0-9]{2}:?[0-9]{2})",
        skip,
    ),
    ("round_the_clock", r"7\s*[×x*]\s*24(?:\s*小时|h)?|24\s*/\s*7", skip),
    ("ymd", r"(?<![0-9.])([0-9]{4})[-/.]([0-9]{1,2})[-/.]([0-9]{1,2})(?![0-9])", ymd),
    (
        "ymd_cn",
        rf"(?<![0-9.])([0-9]{{4}}|[〇零一二三四五六七八九]{{4}})\s*年\s*({_MD})\s*月"
        rf"(?:\s*({_MD})\s*[日号])?",
        ymd,
    ),
    ("ym", r"(?<![0-9.])([0-9]{4})-([0-9]{1,2})(?![0-9-])()", ymd),
    (
        "year",
        r"(?<![0-9.])([0-9]{4}|[〇零一二三四五六七八九]{4})\s*年(?!级|纪|龄)",
        year,
    ),
    ("month_day", rf"({_MD})\s*月\s*({_MD})\s*[日号]", month_day),
    (
        "day_of",  # 每月5日, 至8日: a day of the month, not five days
        rf"(?:每月|本月|下月|上月|当月|次月|于|在|截至|截止到?|至|到)\s*({_MD})\s*[日号]"
        r"(?!\s*(?:内|以内|之内|后|之后)|[楼线门口床位房厅馆室台桌院码]|会议室)",
        day,
    ),
    ("day_hao", rf"({_MD})\s*号", day),
    ("month", rf"({_MD}|{_CN_AT}两)\s*月(?:份)?", month),
    (
        "slash",  # 12/5, never a fraction in a computation (1/2 × 300)
        r"(?<![0-9./)A-Za-z])([0-9]{1,2})/([0-9]{1,2})(?![0-9/.])(?!\s*(?:[=≈×*+\-÷/]|的|之))",
        slash,
    ),
    (
        "english_mdy",
        rf"(?<![A-Za-z])(?P<month>{_MONTH})\s+(?P<day>[0-9]{{1,2}})(?:st|nd|rd|th)?(?![0-9:])"
        r"(?:,?\s+(?P<year>[0-9]{4}))?",
        english_date,
    ),
    (
        "english_dmy",
        rf"(?<![0-9.])(?P<day>[0-9]{{1,2}})(?:st|nd|rd|th)?\s+(?P<month>{_MONTH})"
        r"(?:,?\s+(?P<year>[0-9]{4}))?",
        english_date,
    ),
    ("english_my", rf"(?<![A-Za-z])(?P<month>{_MONTH})\s+(?P<year>[0-9]{{4}})", english_date),
    (
        "colon_time",
        rf"(?:({_PERIOD})\s*)?(?<![0-9:.])([0-9]{{1,2}}):([0-9]{{2}})(?::[0-9]{{2}})?(?![0-9])"
        rf"(?:\s*({_AMPM}))?",
        colon_time,
    ),
    ("ampm_time", rf"(?:({_PERIOD})\s*)?(?<![0-9.:])([0-9]{{1,2}})\s*({_AMPM})", ampm_time),
    (
        "cn_time",
        rf"(?:(?P<period>{_PERIOD})\s*)?"
        rf"(?:(?<![0-9.])(?P<digits>[0-9]{{1,2}})|{_CN_AT}(?P<cn>[零一二两三四五六七八九十]{{1,3}}))"
        r"\s*(?:点(?![击评赞名子心儿])|时(?![间候长效代刻段区节期髦尚常]))"
        r"(?:\s*(?P<after>半|一刻|三刻|整|钟)"
        r"|\s*(?P<minute>[0-9]{1,2}|[零一二三四五六七八九十]{1,3})\s*分(?!之|钟)"
        r"|(?<=点)(?P<minute2>[0-9]{2})(?![0-9]))?",
        cn_time,
    ),
    (
        "version",
        r"(?<![A-Za-z])[vV][0-9]+(?:\.[0-9]+)*"
        r"|(?:版本号?|(?<![A-Za-z])(?:version|Version|ver\.?))\s*[:：]?\s*[vV]?[0-9]+(?:\.[0-9]+)*"
        r"|(?<![0-9.])[0-9]+(?:\.[0-9]+){2,}",
        skip,
    ),
    (
        "phone",
        r"(?<![0-9])\+?[0-9]{2,4}(?:-[0-9]{3,4}){2,}(?![0-9])|(?<![0-9])[0-9]{3,4}-[0-9]{7,8}"
        r"(?![0-9])|\+[0-9]{1,3}[ -]?[0-9]{3,4}[ -]?[0-9]{4}[ -]?[0-9]{4}",
        skip,
    ),
    (
        "range",  # 3-5 天, 100~200 元, 三到五天: two figures of one unit
        rf"({_NUM})\s*(?:-|~|—|–|至|到)\s*({_NUM})\s*({_UNITS_ANY})(?!\s*[=≈])",
        span,
    ),
    (
        "prefixed",
        rf"({_CUR_BEFORE})\s*({_DIG})({_MAG})?(?:\s*(?:元|(?i:usd|dollars?)(?![A-Za-z])))?",
        prefixed,
    ),
    ("amount", rf"({_NUM})\s*({_CUR_AFTER})", with_unit),
    ("percent", rf"({_NUM})\s*({_PCT})", with_unit),
    (
        "percent_cn",
        rf"(百分之|千分之)\s*((?:{_DIG}|[{_CN_CHARS}]+)(?:点[0-9{_CN_CHARS}]+)?)",
        per_cent_cn,
    ),
    (
        "discount",
        rf"(?:(?<![0-9.])([0-9](?:\.[0-9])?)|{_CN_AT}([一二三四五六七八九]{{1,2}}))折"
        r"(?![扣旧叠中腾磨射服])",
        discount,
    ),
    (
        "half",
        rf"(?:({_NUM})\s*个\s*半|(?<![一多大])半\s*个?)\s*(小时|钟头|天|日|年|月|周|星期|工作日)",
        half,
    ),
    ("duration", rf"({_NUM})\s*({_DUR})(半)?", with_unit),
    ("count", rf"({_NUM})\s*({_COUNT})", with_unit),
    (
        "english_words",
        r"(?<![A-Za-z-])(?i:(" + "|".join(EN_NUMBER) + r")(?:\s+|-)("
        r"(?:business|working)\s+days?|days?|hours?|minutes?|weeks?|months?|years?|nights?"
        r"|people|persons?|guests?|times|percent|dollars?))(?![A-Za-z])",
        english_words,
    ),
    ("english_half", r"(?i:half\s+an?\s+(hour|day))(?![A-Za-z])", english_half),
    (
        "code",  # A3, TASK-12, 5G, 2x, iPhone15
        r"(?<![A-Za-z0-9_])[A-Za-z]+[-_]?[0-9][A-Za-z0-9_-]*"
        r"|(?<![A-Za-z0-9_.])[0-9]+(?![kK](?![A-Za-z]))[A-Za-z_][A-Za-z0-9_-]*",
        skip,
    ),
    ("digit_run", r"(?<![0-9.])[0-9]{7,}(?![0-9])", skip),
    ("bare", _NUM, bare),
]


_RULES = {
    name: (re.compile(pattern, re.MULTILINE), handler) for name, pattern, handler in _RULE_LIST
}
# One pass over the text finds which rule matches where (each rule is one named group; the
# rules' own names are dropped, since two rules may use the same ones); the rule's own
# pattern then reads the groups.
_SCANNER = re.compile(
    "|".join(
        f"(?P<{name}>{re.sub(r'[(][?]P<[a-z0-9]+>', '(?:', pattern)})"
        for name, pattern, _ in _RULE_LIST
    ),
    re.MULTILINE,
)
