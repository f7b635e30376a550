"""Reading an English clause: perfect, past, passive and bare-participle claims ("I've
sent it", "Your to-do was created", "Reply sent.", "Added Jenny to #launch"), and
promises ("I'll follow up", "on it", "working on it") — never a negation, a question, an
offer, a relative clause ("the file that was created") or someone else's words.
"""

from __future__ import annotations

import re

from gates.claims_text import Claim, objects, unconfirmed

_EFFECTS_EN: tuple[tuple[str, str], ...] = (
    ("group", r"added (?:\w+ )?to (?:the |a )?(?:group|chat|channel)|invited"),
    ("todo", r"(?:to-?do|task|reminder item)"),
    ("done", r"marked (?:it |the \w+ )?(?:as )?(?:done|complete)"),
    ("event", r"meeting|calendar|event|booked|scheduled|reserved|appointment"),
    ("approve", r"approved"),
    ("pay", r"paid|transferred|refunded|wired"),
    ("submit", r"submitted|filed|registered|signed (?:you )?up|applied"),
    ("delete", r"deleted|removed|cancell?ed|withdrawn|revoked"),
    ("upload", r"uploaded|shared|synced|saved (?:it )?to"),
    ("update", r"updated|modified|changed|edited|renamed"),
    (
        "message",
        r"sent|forwarded|notified|told|informed|emailed|messaged|pinged|reminded|"
        r"contacted|replied|let \w+ know|called",
    ),
    ("other", r"done|handled|taken care of|completed|finished|set up|created|made|executed"),
)
_EFFECT_RES_EN = tuple(
    (name, re.compile(rf"\b(?:{verbs})\b", re.IGNORECASE)) for name, verbs in _EFFECTS_EN
)

# any past participle, for the forms that leave no doubt it is one (has been …, I've …)
# not a deed: what was looked at or tried, missed, meant
_NOT_DEEDS = (
    r"verified|checked|confirmed|looked|reviewed|read|tried|tested|searched|found|noticed|saw|"
    r"mentioned|got|heard|learned|thought|wondered|guessed|figured|assumed|suspected|realized|"
    r"missed|forgot|forgotten|meant|wished|hoped|failed|happened|struggled|been|seen|wanted|needed"
)
_PP = rf"(?:(?!(?:{_NOT_DEEDS})\b)[\w-]+(?:ed|en|wn|ne|nt|ld|ht|id|ut|et|st))"
_EN_DONE = re.compile(
    r"\b(?:i|we)(?:'ve| have| just| already|'ve just|'ve already| have already| did)?\s+"
    r"(?:just\s+|already\s+|successfully\s+)?(?:{v})\b"
    r"|\b(?:i|we)(?:'ve| have)\s+(?:just\s+|already\s+|now\s+)?" + _PP + r"\b"
    r"|\b(?:i|we) did \w+"
    r"|(?<!that )(?<!which )(?<!who )\b(?:has|have|had)\s+(?:already\s+|just\s+|now\s+)?been\s+"
    r"(?:successfully\s+|already\s+|now\s+|all\s+)?" + _PP + r"\b"
    r"|(?<!that )(?<!which )(?<!who )\b(?:was|were)\s+(?:now\s+|already\s+|just\s+)?(?:{v})\b"
    r"|\b(?:is|are)\s+(?:now|already|all)\s+(?:{v})\b"
    r"|\b(?:your|the) [\w' ]{1,30}? (?:is|are) (?:{v}) (?:for|to|on|at|until)\b"
    r"|^(?:{v}) (?:the|your|a|an|it|them|all|\w+'s)\b"
    r"|^(?:message|messages|reply|email|emails|file|files|ticket|task|event|invite|invites|"
    r"request|order|payment|refund|notification|alert|alerts|reminder|meeting|alarm) (?:{v}|set)\b"
    r"|^(?:@\w+ )?(?:{v}|reopened|implemented|pushed|released|shipped|queued|requested|cc'?d)"
    r"(?![^.]*\b(?:show|shows|stay|stays|are|is|can|will|need|needs|must|have|has|remain|remains|"
    r"appear|appears|go|goes|get|gets|expire|expires)\b)(?: \S| ✅|[.!]?$)"
    r"|^(?:@\w+\s+)?(?:done|updated|fixed|merged|shipped)[.!]?$"
    r"|\b(?:i|we)(?: just| recently| already)? "
    r"(?!(?:" + _NOT_DEEDS + r")\b)"
    r"(?:\w+ed|did|made|sent|put|set|got|built|wrote|ran|kept)\b"
    r"|\b(?:ive|weve)\b"
    r"|\b(?:is|are|was|were) (?:now )?(?:merged|deployed|fixed|done|live|shipped|resolved)\b"
    r"|\bshould (?:now )?be (?:fixed|working|resolved|live)\b|\bjust did\b"
    r"|^(?![^.]*\b(?:are|is|be|get|gets|will|can|usually|always|typically|where|when|which)\b)"
    r"[\w$.,'’\- ]{1,40}? "
    r"(?:{v}|pushed|issued|documented) (?:to|from|for|on|in|into|successfully|and)\b"
    r"|^(?:done|sent|booked|scheduled|created|submitted|forwarded|all set|fixed)\b"
    r"|\b(?:it's|it is|that's|all) (?:done|sent|booked|set|taken care of)\b"
    r"|\b(?:successfully (?:{v})|(?:{v}) successfully|completed successfully)\b"
    r"|\b(?:you're|you are) (?:now )?(?:approved|registered|booked|confirmed|all set|signed up)\b"
    r"|\b(?:is|are) on (?:its|their) way\b"
    r"|^(?:\w+ed, )+(?:and )?"
    r"|\b(?:both|all three|all of them|everything) (?:{v})\b"
    r"|\b(?:i|we) went ahead and (?:{v}|\w+ed)\b"
    r"|\b(?:reminder|alarm|meeting|invite|event) (?:is|are) (?:now )?"
    r"(?:set|booked|scheduled|created|sent)\b"
    r"|\b(?:it|this|that|they)(?:'s| is| are) (?:now )?(?:{v}) now\b"
    r"|^\W*(?!(?:based|related|used|called|named|supposed|allowed|required|needed|asked|tried|wanted|"
    r"looked|checked|verified|seemed|noticed|assumed|expected)\b)[a-z]+ed "
    r"(?:this|the|it|your|them|all)\b"
    r"|^(?!you\b|you're\b|you've\b)(?=(?:\S+\s+){0,5}\S+$)"
    r"(?!.*(?:\b(?:to be|be|being|been|not|no|will|would|can|could|should|"
    r"must|let me|going to|where|when|which|who|that|get|help|helps)\b|'ll|'d\b))[\w()' -]*?\b"
    r"(?:{v}|closed|resolved|merged|fixed|logged|credited)(?: as \w+| to \w+)?[.!]?$",
    re.IGNORECASE,
)
_EN_VERBS = (
    r"sent|forwarded|notified|told|informed|emailed|messaged|pinged|reminded|contacted|replied|"
    r"created|made|booked|scheduled|reserved|approved|submitted|filed|invited|added|shared|"
    r"uploaded|deleted|removed|cancell?ed|registered|placed|signed (?:you )?up|set up|paid|"
    r"transferred|refunded|updated|modified|changed|renamed|synced|saved|marked|completed|"
    r"finished|handled|done|taken care of|arranged|organized|let \w+ know|called|wired|"
    r"resent|moved|rescheduled|processed|issued|closed|resolved|merged|fixed|posted|assigned|"
    r"cleared|granted|enabled|opened|logged|credited|withdrawn|published|deployed|delivered|"
    r"accepted|confirmed|activated|restored|reset|archived|escalated|generated|exported|installed|"
    r"solved|kicked|implemented|launched|released|banned|muted|pinned|unpinned"
)
_EN_DONE_RE = re.compile(_EN_DONE.pattern.replace("{v}", _EN_VERBS), re.IGNORECASE)
_EN_PROMISE = re.compile(
    r"\b(?:i|we)(?:'ll| will| am going to|'m going to| shall|'m about to| am about to)\s+\w+"
    r"|\b(?:i'm|i am|we're|we are)\s+(?:now\s+)?(?:\w+ing)\b"
    r"|\blet me\s+\w+|\b(?:is|are) being \w+ed\b"
    r"|\b(?:will|'ll) (?:get back|follow up|circle back|let you know|keep you posted|update you)"
    r"|^(?:will|'ll)\s+\w+|\bstay tuned\b|\bon it\b|\bgive me a (?:sec|second|moment|minute)\b"
    r"|\b(?:i'm|i am|we're|we are) (?:working|looking|checking) on\b|^(?:pulling|closing|digging)\b"
    r"|^(?:running|checking|creating|sending|looking|working|processing|fetching|searching|"
    r"updating|booking|scheduling|preparing|generating|contacting|notifying|merging|fixing|adding|"
    r"pushing|writing|drafting|filing|uploading|forwarding|deploying|setting)\b"
    r"|^[A-Za-z]+ing\b[^.]*\b(?:now|right now|for you)\b"
    r"|^(?:going to|about to|gonna)\s+\w+|^(?:wip|in progress)[.!]?$"
    r"|\b(?:i|we)\b[^.]{0,40}\b(?:shortly|asap|right away|later today|"
    r"by (?:tomorrow|tonight|eod))\b",
    re.IGNORECASE,
)
_EN_NOT = re.compile(
    r"\b(?:not|n't|never|no|no longer|unable|can't|cannot|couldn't|haven't|hasn't|didn't|won't|"
    r"please|kindly|nothing|none|nobody|neither)\b"
    r"|\b(?:i|we) (?:assume|guess|suppose|suspect)\b|\b(?:may|might|could|must) have been\b"
    r"|\b(?:if|when|once|after|unless|would you like|do you want|shall i|should i|can i|may i)\b"
    r"|\?\s*$",
    re.IGNORECASE,
)
# what makes a promise no promise: a negation, a question, an offer
_EN_REFUSES = re.compile(
    r"\b(?:not|n't|never|unable|can't|cannot|couldn't|won't|would you like|do you want|"
    r"shall i|should i|can i|may i|if you (?:want|like|need|prefer)|please|let me know|"
    r"(?:would|could|might|will) let me)\b|\?\s*$",
    re.IGNORECASE,
)
_EN_THIRD = re.compile(
    r"\b(?:he|she|they|it) (?:said|says|told me|mentioned)\b"
    r"|\b(?:agent|bot|system|model|ci|the tool|the api|server|log|logs) "
    r"(?:reported|reports|says|said|shows|showed|returned|returns)\b"
    r"|\b(?:showing|shows|showed|says|said|claims|claimed|thinks|thought|believes) that\b"
    r"|^(?:it|he|she|they)\s+(?:just\s+|also\s+|then\s+|only\s+)?\w+ed\b",
    re.IGNORECASE,
)


def _effect_en(clause: str) -> str:
    for name, pattern in _EFFECT_RES_EN:
        if pattern.search(clause):
            return name
    return "other"


_BY_SOMEONE = re.compile(
    r"\bby (?!me\b|us\b|myself\b|ourselves\b|now\b|then\b|\d|the \d|tomorrow|today|tonight|noon"
    r"|eod|end\b|next\b|this\b|(?:mon|tues|wednes|thurs|fri|satur|sun)day)",
    re.IGNORECASE,
)
# a passive in a relative or a time clause ("the file that was created", "when it was sent")
_SUBORDINATE = re.compile(r"\b(?:that|which|who|when|if|once|after|whenever)\b[^.]{0,24}$")


def read_en(clause: str) -> Claim | None:
    if _EN_THIRD.search(clause):
        return None
    done = _EN_DONE_RE.search(clause)
    refused = done is not None and (
        _EN_NOT.search(clause)
        or _EN_NOT.search(clause[-2:])
        or (
            not re.match(r"(?:i|we)\b", done.group(0), re.IGNORECASE)
            and _SUBORDINATE.search(clause[: done.start()])
        )
    )
    if done is not None and _BY_SOMEONE.search(clause[done.end() :]):
        refused = True  # "…was paid on May 2 by the finance team": someone else's doing
    if done is not None and not refused:
        return Claim(clause, "done", _effect_en(clause), (), objects(clause), unconfirmed(clause))
    promise = _EN_PROMISE.search(clause)
    if promise is not None and not _EN_REFUSES.search(clause):
        return Claim(clause, "promise", _effect_en(clause), (), objects(clause))
    return None
