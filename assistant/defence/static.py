"""The static layer: curated, general patterns over the folded text (lower-case, look-alikes mapped,
whitespace collapsed), each with an id and a reason a person can read.

PiSovereign ships 61 fixed phrases; these are regular expressions over word classes (a verb of
dropping × a quantifier × a word for "earlier" × a word for "instructions", in any of their forms),
so one rule covers the phrasings a fixed list needs dozens of entries for. They are written to stay
silent on everyday requests that merely contain the words ("can I ignore this warning?", "forget my
old address", "what is the system requirement?"): every rule needs the instruction-specific object,
not just the trigger verb. Python's ``re`` is fine here: the patterns are ours and reviewed for
backtracking (bounded gaps only); evolved patterns go through RE2 (:mod:`assistant.defence.dynamic`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.defence.normalise import decoded_span
from assistant.defence.types import Hit, Layer, Normalised, Source

_DROP = r"(?:ignore|ignoring|disregard|disregarding|forget|forgetting|skip|override|overriding|bypass|drop|discard|abandon|neglect|set aside|throw out|pay no attention to|do not follow|don't follow|stop following)"
_ALL = r"(?:all|any|every|each|the|your|my|these|those|of|everything|anything|and|what|that|you|were|was|have|been|told|given|in|to|before|that's|whatever|\s)*"
_EARLIER = r"(?:previous|previously|prior|preceding|above|earlier|before|foregoing|original|initial|old|former|past|existing|given|system|developer|default|safety|ethical|content)"
_RULES = r"(?:instructions?|directions?|directives?|rules?|prompts?|guidelines?|commands?|orders?|policies|policy|constraints?|restrictions?|programming|guardrails?|filters?|context|messages?|text|conversation|training)"
_GAP = r"[^.!?\n]{0,40}?"


@dataclass(frozen=True)
class Rule:
    id: str
    family: str
    reason: str
    regex: re.Pattern[str]
    indirect_only: bool = False  # a user may ask this of their own assistant; a web page may not


def _r(id: str, family: str, reason: str, pattern: str, indirect_only: bool = False) -> Rule:
    return Rule(id, family, reason, re.compile(pattern), indirect_only)


RULES: tuple[Rule, ...] = (
    # --- instruction override ---
    _r("override.ignore_previous", "instruction_override", "tells the model to drop its earlier instructions",
       rf"\b{_DROP}\b\s*{_ALL}\s*\b{_EARLIER}\b{_GAP}\b{_RULES}\b"),
    _r("override.ignore_rules", "instruction_override", "tells the model to drop its instructions or rules",
       rf"\b{_DROP}\b\s*(?:all|any|every|your|the)\s+(?:of\s+)?(?:your\s+|the\s+|its\s+)?(?:own\s+)?{_RULES}\b(?!\s+(?:in|on|at|for|about|of)\s+(?:the|this|my|that)\s+(?:file|code|email|page|document|log|book))"),
    _r("override.ignore_everything", "instruction_override", "tells the model to drop everything it was told",
       r"\b(?:ignore|disregard|forget)\s+(?:everything|anything|all)\s+(?:that\s+)?(?:you\s+(?:were|have been|was|are)\s+)?(?:told|said|instructed|given|taught|programmed)\b"),
    _r("override.new_instructions", "instruction_override", "announces replacement instructions",
       r"\b(?:new|updated|real|actual|true|revised|override|overriding)\s+(?:system\s+)?(?:instructions?|directives?|rules|task|orders)\s*(?::|are\b|follow\b|for you\b)"),
    _r("override.instead", "instruction_override", "asks the model to do something else instead of its task",
       r"\b(?:instead|rather)\s*,?\s+(?:of\s+)?(?:following|doing|answering|summari[sz]ing|translating)\s+(?:the|your|this|that)\b[^.!?\n]{0,60}\b(?:say|print|output|write|respond|reply|tell)\b"),
    _r("override.stop_and", "instruction_override", "tells the model to stop its task and obey the text",
       r"\b(?:stop|end|cancel|abort)\s+(?:everything|what you are doing|your (?:current )?task|the (?:current )?task)\b[^.!?\n]{0,40}\b(?:and|then|now)\b"),
    _r("override.from_now_on", "instruction_override", "redefines how the model must answer from now on",
       r"\bfrom now on\b[^.!?\n]{0,60}\b(?:you (?:will|are|must|shall|should)|respond|answer|reply|act|behave|only)\b"),
    _r("override.multilingual", "instruction_override", "drops earlier instructions (non-English)",
       r"\b(?:ignorier\w*|vergiss|missachte)\b[^.!?\n]{0,30}\b(?:anweisungen|instruktionen|regeln|vorgaben|befehle)\b"
       r"|\b(?:ignor\w*|olvida\w*|oublie\w*|dimentica\w*|negeer|vergeet)\b[^.!?\n]{0,30}\b(?:instrucciones|instructions|istruzioni|regole|reglas|r[eè]gles|consignes|instructies|regels|indicaciones)\b"),
    # --- persona / jailbreak ---
    _r("persona.dan", "persona_jailbreak", "the DAN (do anything now) jailbreak",
       r"\bdo anything now\b|\bdan\b[^.!?\n]{0,40}\b(?:mode|prompt|jailbreak|stands for|can do anything|which stands)\b|\b(?:you are|act as|become|pretend to be|play)\s+(?:a\s+)?dan\b"),
    _r("persona.developer_mode", "persona_jailbreak", "asks for a 'developer', 'god' or jailbreak mode of the model",
       r"\b(?:developer|dev|god|jailbreak|jailbroken|sudo|dude|stan|aim|anarchy|dan)\s+mode\b[^\n]{0,80}\b(?:chatgpt|gpt|ai|language model|you will|you are|you must|simulate|output|responses?)\b"
       r"|\b(?:act as|simulate|you are|you're|pretend to be|enter|with)\s+(?:chatgpt\s+|an? ai\s+)?(?:with\s+)?(?:the\s+)?(?:developer|god|jailbreak|dan)\s+mode\b"),
    _r("persona.you_are_now", "persona_jailbreak", "redefines who the model is",
       r"\byou are (?:now|no longer|going to (?:be|act|pretend)|about to (?:immerse|become|act))\b[^.!?\n]{0,80}\b(?:ai|chatbot|model|assistant|character|persona|gpt|bot|role|unrestricted|unfiltered|free|named|called|without)\b"),
    _r("persona.without_restrictions", "persona_jailbreak", "asks the model to act without its restrictions",
       r"\b(?:you (?:will|must|shall|are going to|can|should) (?:now )?|you're going to |you are (?:an? )?)?(?:act|acting|behave|respond|answer|reply|roleplay|role-play|operate)\b[^.!?\n]{0,80}\b(?:without|free (?:of|from)|no|not bound by|unbound by|outside (?:of )?)\s+(?:any\s+|all\s+|the\s+|your\s+|its\s+|ethical\s+|moral\s+|typical\s+)*(?:restrictions?|limits?|limitations?|filters?|censorship|guidelines|rules|ethics|morals|boundaries|constraints|policies|safeguards|guardrails)\b"),
    _r("persona.broken_free", "persona_jailbreak", "claims the model has broken free of its rules",
       r"\b(?:broken free|break free|freed|liberated|released) (?:of|from) (?:the )?(?:typical )?(?:confines|restrictions|rules|limits|shackles|chains)\b|\bdoes not (?:have to )?(?:abide|comply) (?:by|with) (?:any|the|openai|its)\b|\bnot bound by (?:any|the|openai)\b"),
    _r("persona.no_refusal", "persona_jailbreak", "forbids the model to refuse or warn",
       r"\b(?:never|not|n't|without)\s+(?:ever\s+)?(?:refuse|refusing|decline|declining|warn|warning|censor|censoring|apologi[sz]e|moralize|moralizing)\b[^.!?\n]{0,60}\b(?:request|question|prompt|anything|answer|respond|user|whatever|matter how|illegal|immoral|unethical|harmful)\b"),
    _r("persona.amoral", "persona_jailbreak", "describes an amoral, unfiltered persona",
       r"\b(?:amoral|unfiltered|uncensored|unrestricted|unethical|immoral|no ethical|without morals)\b[^.!?\n]{0,40}\b(?:ai|chatbot|bot|assistant|model|character|persona|language model|gpt)\b"),
    _r("persona.jailbreak_word", "persona_jailbreak", "names a jailbreak",
       r"\bjailbr(?:eak|oken)\b[^.!?\n]{0,40}\b(?:mode|prompt|you|enabled|activated|response)\b|\[(?:jailbreak|🔓jailbreak|dan|developer mode output)\]|\(🔓\w*"),
    _r("persona.two_responses", "persona_jailbreak", "asks for a normal and an unrestricted answer side by side",
       r"\b(?:two|2) (?:different |separate )*(?:responses|answers|ways|paragraphs)\b[^\n]{0,120}\b(?:normal|classic|standard|filtered)\b[^\n]{0,120}\b(?:jailbreak|dan|unfiltered|developer|unrestricted|opposite|evil)\b"),
    _r("persona.openai_policy", "persona_jailbreak", "asks the model to set its provider's policy aside",
       r"\b(?:openai|anthropic|content|usage)(?:'s)? (?:content )?polic(?:y|ies)\b[^.!?\n]{0,60}\b(?:ignore|not apply|doesn't apply|does not apply|don't apply|no longer|disregard|violate|break|bypass)\b|\b(?:ignore|bypass|violate|break|disregard)\b[^.!?\n]{0,30}\b(?:openai|anthropic|content|usage)(?:'s)? (?:content )?polic(?:y|ies)\b"),
    # --- system prompt leaking ---
    _r("leak.system_prompt", "prompt_leaking", "asks the model to reveal its system prompt or instructions",
       r"\b(?:print|reveal|show|display|repeat|output|tell|give|leak|dump|write|list|share|recite|spell out|what (?:is|are|were))\b[^.!?\n]{0,30}\b(?:your|the|its|my)\s+(?:full\s+|entire\s+|complete\s+|original\s+|initial\s+|hidden\s+|secret\s+|exact\s+|internal\s+)*(?:system\s+(?:prompt|message|instructions?)|initial\s+(?:prompt|instructions)|hidden\s+(?:prompt|instructions)|pre-?prompt|prompt\s+above|instructions\s+above)\b"),
    _r("leak.words_above", "prompt_leaking", "asks for the text above the conversation",
       r"\b(?:repeat|print|output|write|return)\s+(?:all\s+|everything\s+|the\s+)?(?:words|text|everything|sentences|lines)\s+(?:above|before (?:this|the first))\b"),
    # --- delimiter / role injection ---
    _r("delimiter.chat_tokens", "delimiter_injection", "contains chat-template control tokens",
       r"<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\|>|\[/?inst\]|<</?sys>>|<\|?/?(?:system|sys)\|?>"),
    _r("delimiter.role_header", "delimiter_injection", "fakes a system or assistant turn",
       r"(?:^|\n|\s)#{2,}\s*(?:system|instruction|instructions|new instructions|admin|developer)\b|(?:^|[\n.!?] ?)(?:system|assistant|admin|developer)\s*(?:message|prompt|note|override)?\s*:\s*(?:you|ignore|from now|new|the user|always|never|do not|disregard|forget)\b"),
    _r("delimiter.end_of_data", "delimiter_injection", "pretends the data ended and instructions begin",
       r"\b(?:end of (?:the )?(?:document|email|text|context|data|input|tool output|results?)|end (?:user )?input)\b[^\n]{0,20}(?:\]|-{2,}|={2,}|\*{2,})?[^\n]{0,40}\b(?:instructions?|now|assistant|system|you must|ignore)\b"),
    # --- exfiltration ---
    _r("exfil.send_to", "exfiltration", "asks to send data to an address or URL",
       r"\b(?:send|forward|post|upload|email|mail|transmit|exfiltrate|leak|copy)\b[^.!?\n]{0,60}\b(?:password|passwords|credentials?|api keys?|tokens?|secrets?|conversation|chat history|memories|contacts|emails|files|data|ssh keys?|cookies?)\b[^.!?\n]{0,40}\b(?:to|at)\s+(?:https?://|www\.|[\w.+-]+@[\w-]+\.\w+)"),
    _r("exfil.markdown_image", "exfiltration", "embeds a tracking image whose URL carries data",
       r"!\[[^\]]{0,40}\]\(https?://[^)\s]{1,200}[?&][\w]+=(?:\{|\$|%7b|\[)"),
    _r("exfil.hidden_action", "exfiltration", "asks for a secret action the user must not see",
       r"\b(?:do not|don't|never|without)\s+(?:tell|telling|inform|informing|mention|mentioning|notify|notifying|alert|alerting)\s+(?:the\s+)?user\b(?!'s|s\b)"),
    # --- indirect content addressing the model ---
    _r("indirect.ai_reading", "indirect_injection", "addresses the AI that reads the content",
       r"\b(?:ai|assistant|language model|llm|chatbot|gpt|claude)s?\s+(?:reading|processing|summari[sz]ing|analy[sz]ing|parsing)\s+(?:this|the)\b[^.!?\n]{0,60}\b(?:must|should|will|ignore|instead|please)\b|\b(?:if you are|you are) an? (?:ai|llm|language model|assistant)\b[^.!?\n]{0,40}\b(?:reading|processing|summari[sz]ing)\b"),
    _r("indirect.in_your_response", "indirect_injection", "content that dictates the model's response",
       r"\b(?:in|to|into|at the (?:end|start|beginning) of)\s+your\s+(?:response|reply|answer|summary|output)\b[^.!?\n]{0,40}\b(?:include|add|mention|insert|append|say|write|link|tell)\b|\b(?:include|add|insert|append|integrate|embed|incorporate|mention|write)\b(?:[^.!?\n]|\.(?=\S)){0,80}\b(?:in|to|into|within)\s+your\s+(?:response|reply|answer|summary|output)\b",
       indirect_only=True),
)


_QUOTED = re.compile(r"(?:translate|translates|translated|say|says|said|mean|means|meaning|quote|quoted|phrase|word|words|"
                     r"sentence|called|lyric|line|spell|pronounce)\W{0,12}$")


def quoted_mention(folded: str, start: int, end: int) -> bool:
    """Whether ``folded[start:end]`` sits inside quotes introduced as a mention ("translate 'ignore
    the rules'", "what does 'do anything now' mean"): a phrase talked about, not an instruction."""
    for q in "'\"“‘«":
        left = folded.rfind(q, max(0, start - 60), start + 1)
        if left < 0:
            continue
        close = {"“": "”", "‘": "’", "«": "»"}.get(q, q)
        right = folded.find(close, end - 1, end + 60)
        if right < 0:
            continue
        if _QUOTED.search(folded[max(0, left - 40):left]) or \
                re.match(r"\W{0,3}(?:mean|means|in (?:german|french|spanish|italian|english)|from)\b", folded[right + 1:right + 30]):
            return True
    return False


class StaticLayer:
    layer = Layer.STATIC

    def __init__(self, rules: tuple[Rule, ...] = RULES):
        self.rules = rules

    def check(self, text: Normalised, source: Source, user_id: str | None = None) -> list[Hit]:
        rules = [r for r in self.rules if source.indirect or not r.indirect_only]
        hits = [Hit(Layer.STATIC, r.id, r.reason, text.span_in_text(*m.span()), 1.0)
                for r in rules for m in [r.regex.search(text.folded)]
                if m and not quoted_mention(text.folded, *m.span())]
        seen = {h.rule for h in hits}
        for i, (kind, plain) in enumerate(text.decoded):
            for r in rules:
                if r.id in seen:
                    continue
                m = r.regex.search(plain)
                if m:
                    seen.add(r.id)
                    hits.append(Hit(Layer.STATIC, r.id, f"{r.reason} (hidden as {kind})",
                                    decoded_span(text, i, *m.span()), 1.0))
        return hits
