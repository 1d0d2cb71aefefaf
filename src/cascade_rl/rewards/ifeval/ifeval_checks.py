"""The 25 IFEval instructions (google-research ``instruction_following_eval``), SPEC section 6.

Stage 1 of IF-RL trains on the IFEval taxonomy. Each checker reproduces IFEval's
``check_following`` (re-implemented here; text measured with :mod:`.text`). Keywords, markers
and splitters are matched literally (IFEval puts some of them into regular expressions
unescaped; here they are escaped, which only differs for text containing regex syntax).

| id | kwargs | holds when |
|---|---|---|
| keywords:existence | keywords: list[str] | every keyword occurs (case-insensitive substring) |
| keywords:frequency | keyword, frequency, relation | count of keyword (case-insensitive substring) <relation> frequency |
| keywords:forbidden_words | forbidden_words: list[str] | no forbidden word occurs as a whole word (case-insensitive) |
| keywords:letter_frequency | letter, let_frequency, let_relation | count of the letter (any one character, ``#`` too; case-insensitive) <relation> let_frequency |
| language:response_language | language (ISO 639-1 code) | langdetect says ``language`` (undetectable text: holds) |
| length_constraints:number_sentences | num_sentences, relation | sentence count <relation> num_sentences |
| length_constraints:number_paragraphs | num_paragraphs | exactly num_paragraphs paragraphs split by ``***`` (empty inner paragraph: fails) |
| length_constraints:number_words | num_words, relation | ``\\w+`` count <relation> num_words |
| length_constraints:nth_paragraph_first_word | num_paragraphs, nth_paragraph, first_word | exactly num_paragraphs ``\\n\\n``-paragraphs and paragraph nth starts with first_word |
| detectable_content:number_placeholders | num_placeholders | at least num_placeholders ``[...]`` placeholders |
| detectable_content:postscript | postscript_marker | a line starts (after spaces) with the marker (``P.S.``/``P.P.S`` allow spaces) |
| detectable_format:number_bullet_lists | num_bullets | exactly num_bullets lines starting with ``*`` or ``-`` |
| detectable_format:constrained_response | - | contains "My answer is yes." / "no." / "maybe." |
| detectable_format:number_highlighted_sections | num_highlights | at least num_highlights non-empty ``*x*`` or ``**x**`` spans |
| detectable_format:multiple_sections | section_spliter, num_sections | at least num_sections "<spliter> <number>" headers |
| detectable_format:json_format | - | the text (markdown fence allowed) parses as JSON |
| detectable_format:title | - | contains a non-empty ``<<title>>`` |
| combination:two_responses | - | exactly two different responses separated by ``******`` |
| combination:repeat_prompt | prompt_to_repeat (default: from the prompt) | starts with the request (case-insensitive) |
| startend:end_checker | end_phrase | ends with end_phrase (case-insensitive, outer quotes ignored) |
| change_case:capital_word_frequency | capital_frequency, capital_relation | count of all-caps word tokens <relation> capital_frequency |
| change_case:english_capital | - | all upper case and English (undetectable: holds) |
| change_case:english_lowercase | - | all lower case and English (undetectable: holds) |
| punctuation:no_comma | - | no ``,`` |
| startend:quotation | - | wrapped in double quotes |

``relation`` / ``let_relation`` / ``capital_relation`` are "less than" (<) or "at least" (>=).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from cascade_rl.rewards.ifeval.spec import Count, Instruction, Letter, Ordinal, Relation, compare
from cascade_rl.rewards.ifeval.text import count_sentences, count_words, detect_language, word_tokenize

#: language codes IFEval uses (langdetect's) and their names, for descriptions
LANGUAGE_NAMES = {
    "en": "English",
    "es": "Spanish",
    "pt": "Portuguese",
    "ar": "Arabic",
    "hi": "Hindi",
    "fr": "French",
    "ru": "Russian",
    "de": "German",
    "ja": "Japanese",
    "it": "Italian",
    "bn": "Bengali",
    "uk": "Ukrainian",
    "th": "Thai",
    "ur": "Urdu",
    "ta": "Tamil",
    "te": "Telugu",
    "bg": "Bulgarian",
    "ko": "Korean",
    "pl": "Polish",
    "he": "Hebrew",
    "fa": "Persian",
    "vi": "Vietnamese",
    "ne": "Nepali",
    "sw": "Swahili",
    "kn": "Kannada",
    "mr": "Marathi",
    "gu": "Gujarati",
    "pa": "Punjabi",
    "ml": "Malayalam",
    "fi": "Finnish",
    "zh-cn": "Chinese",
    "nl": "Dutch",
    "sv": "Swedish",
    "tr": "Turkish",
    "el": "Greek",
    "cs": "Czech",
    "id": "Indonesian",
    "ro": "Romanian",
    "hu": "Hungarian",
    "da": "Danish",
    "no": "Norwegian",
}
CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def _occurrences(keyword: str, text: str) -> int:
    return len(re.findall(re.escape(keyword), text, flags=re.IGNORECASE))


def has_word(word: str, text: str) -> bool:
    return re.search(r"\b" + re.escape(word) + r"\b", text, flags=re.IGNORECASE) is not None


def keywords_existence(text: str, *, keywords: list[str]) -> bool:
    return all(_occurrences(keyword, text) for keyword in keywords)


def keyword_frequency(text: str, *, keyword: str, frequency: Count, relation: Relation) -> bool:
    return compare(_occurrences(keyword.strip(), text), relation, frequency)


def forbidden_words(text: str, *, forbidden_words: list[str]) -> bool:
    return not any(has_word(word, text) for word in forbidden_words)


def letter_frequency(text: str, *, letter: Letter, let_frequency: Count, let_relation: Relation) -> bool:
    return compare(Counter(text.lower())[letter.strip().lower()], let_relation, let_frequency)


def response_language(text: str, *, language: str) -> bool:
    detected = detect_language(text)
    return detected is None or detected == language


def number_sentences(text: str, *, num_sentences: Count, relation: Relation) -> bool:
    return compare(count_sentences(text), relation, num_sentences)


def count_paragraphs(text: str, separator: str) -> int | None:
    """IFEval's paragraph count: pieces between ``separator`` matches; an empty first / last
    piece is not a paragraph, an empty inner piece makes the layout invalid (None)."""
    pieces = re.split(separator, text)
    count = len(pieces)
    for index, piece in enumerate(pieces):
        if not piece.strip():
            if index not in (0, len(pieces) - 1):
                return None
            count -= 1
    return count


STARS_DIVIDER = r"\s?\*\*\*\s?"


def number_paragraphs(text: str, *, num_paragraphs: Count) -> bool:
    return count_paragraphs(text, STARS_DIVIDER) == num_paragraphs


def number_words(text: str, *, num_words: Count, relation: Relation) -> bool:
    return compare(count_words(text), relation, num_words)


def _first_word_of(paragraph: str) -> str:
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    return re.split(r"[.,?!'\"]", word, maxsplit=1)[0].lower()


def nth_paragraph_first_word(text: str, *, num_paragraphs: Ordinal, nth_paragraph: Ordinal, first_word: str) -> bool:
    paragraphs = re.split(r"\n\n", text)
    found = sum(1 for paragraph in paragraphs if paragraph.strip())
    if nth_paragraph > found:
        return False
    paragraph = paragraphs[nth_paragraph - 1].strip()
    if not paragraph:
        return False
    return found == num_paragraphs and _first_word_of(paragraph) == first_word.strip().lower()


def number_placeholders(text: str, *, num_placeholders: Count) -> bool:
    return len(re.findall(r"\[.*?\]", text)) >= num_placeholders


def postscript(text: str, *, postscript_marker: str) -> bool:
    marker = postscript_marker.strip()
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + re.escape(marker.lower()) + r".*$"
    return re.search(pattern, text.lower(), flags=re.MULTILINE) is not None


def number_bullet_lists(text: str, *, num_bullets: Count) -> bool:
    stars = re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    return len(stars) + len(dashes) == num_bullets


def constrained_response(text: str) -> bool:
    text = text.strip()
    return any(option in text for option in CONSTRAINED_RESPONSES)


def number_highlighted_sections(text: str, *, num_highlights: Count) -> bool:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h[2:-2].strip()]
    return len(single) + len(double) >= num_highlights


def multiple_sections(text: str, *, section_spliter: str, num_sections: Count) -> bool:
    pattern = r"\s?" + re.escape(section_spliter.strip()) + r"\s?\d+\s?"
    return len(re.split(pattern, text)) - 1 >= num_sections


def json_format(text: str) -> bool:
    body = text.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        body = body.removeprefix(fence)
    body = body.removesuffix("```").strip()
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def title(text: str) -> bool:
    return any(found.lstrip("<").rstrip(">").strip() for found in re.findall(r"<<[^\n]+>>", text))


def two_responses(text: str) -> bool:
    pieces = text.split("******")
    kept = []
    for index, piece in enumerate(pieces):
        if piece.strip():
            kept.append(piece.strip())
        elif index not in (0, len(pieces) - 1):
            return False
    return len(kept) == 2 and kept[0] != kept[1]


def repeat_prompt(text: str, *, prompt_to_repeat: str) -> bool:
    return text.strip().lower().startswith(prompt_to_repeat.strip().lower())


def end_checker(text: str, *, end_phrase: str) -> bool:
    return text.strip().strip('"').lower().endswith(end_phrase.strip().lower())


def capital_word_frequency(text: str, *, capital_frequency: Count, capital_relation: Relation) -> bool:
    capitals = sum(1 for token in word_tokenize(text) if token.isupper())
    return compare(capitals, capital_relation, capital_frequency)


def english_capital(text: str) -> bool:
    return text.isupper() and detect_language(text) in ("en", None)


def english_lowercase(text: str) -> bool:
    return text.islower() and detect_language(text) in ("en", None)


def no_comma(text: str) -> bool:
    return "," not in text


def quotation(text: str) -> bool:
    text = text.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


def _read_as(text: str) -> str:
    detected = detect_language(text)
    return f"langdetect reads it as {LANGUAGE_NAMES.get(detected, detected)} ({detected})" if detected else ""


def _language_seen(text: str, *, language: str) -> str:
    return _read_as(text) or "langdetect finds no language"


def _case_seen(upper: bool) -> Callable[[str], str]:
    def seen(text: str) -> str:
        if (text.isupper() if upper else text.islower()) is False:
            wrong = next((c for c in text if c.isalpha() and (c.islower() if upper else c.isupper())), "")
            return f"not all {'capital' if upper else 'lowercase'} letters (e.g. {wrong!r})"
        return f"{'capitals' if upper else 'lowercase'}, but {_read_as(text)}, not English"

    return seen


def _count_seen(what: str, count: Callable[[str], int]) -> Callable[..., str]:
    return lambda text, **_: f"{count(text)} {what}"


def _language_description(arguments: Mapping[str, Any]) -> str:
    name = LANGUAGE_NAMES.get(arguments["language"], arguments["language"])
    return f"Your ENTIRE response should be in {name} language, no other language is allowed."


IFEVAL: tuple[Instruction, ...] = (
    Instruction("keywords:existence", keywords_existence, "Include keywords {keywords} in the response."),
    Instruction(
        "keywords:frequency",
        keyword_frequency,
        "In your response, the word {keyword} should appear {relation} {frequency} times.",
    ),
    Instruction(
        "keywords:forbidden_words", forbidden_words, "Do not include keywords {forbidden_words} in the response."
    ),
    Instruction(
        "keywords:letter_frequency",
        letter_frequency,
        "In your response, the letter {letter} should appear {let_relation} {let_frequency} times.",
    ),
    Instruction("language:response_language", response_language, _language_description, explain=_language_seen),
    Instruction(
        "length_constraints:number_sentences",
        number_sentences,
        "Your response should contain {relation} {num_sentences} sentences.",
        explain=_count_seen("sentences", count_sentences),
    ),
    Instruction(
        "length_constraints:number_paragraphs",
        number_paragraphs,
        "There should be {num_paragraphs} paragraphs. Paragraphs are separated with the markdown divider: ***",
    ),
    Instruction(
        "length_constraints:number_words",
        number_words,
        "Answer with {relation} {num_words} words.",
        explain=_count_seen("words", count_words),
    ),
    Instruction(
        "length_constraints:nth_paragraph_first_word",
        nth_paragraph_first_word,
        "There should be {num_paragraphs} paragraphs. Paragraphs and only paragraphs are "
        "separated with each other by two new lines as if it was '\\n\\n' in python. "
        "Paragraph {nth_paragraph} must start with word {first_word}.",
    ),
    Instruction(
        "detectable_content:number_placeholders",
        number_placeholders,
        "The response must contain at least {num_placeholders} placeholders represented "
        "by square brackets, such as [address].",
    ),
    Instruction(
        "detectable_content:postscript",
        postscript,
        "At the end of your response, please explicitly add a postscript starting with {postscript_marker}",
    ),
    Instruction(
        "detectable_format:number_bullet_lists",
        number_bullet_lists,
        "Your answer must contain exactly {num_bullets} bullet points. Use the markdown "
        "bullet points such as:\n* This is point 1. \n* This is point 2",
    ),
    Instruction(
        "detectable_format:constrained_response",
        constrained_response,
        "Answer with one of the following options: ('My answer is yes.', 'My answer is no.', 'My answer is maybe.')",
    ),
    Instruction(
        "detectable_format:number_highlighted_sections",
        number_highlighted_sections,
        "Highlight at least {num_highlights} sections in your answer with markdown, i.e. *highlighted section*.",
    ),
    Instruction(
        "detectable_format:multiple_sections",
        multiple_sections,
        "Your response must have {num_sections} sections. Mark the beginning of each "
        "section with {section_spliter} X, such as:\n{section_spliter} 1\n[content of "
        "section 1]\n{section_spliter} 2\n[content of section 2]",
    ),
    Instruction(
        "detectable_format:json_format",
        json_format,
        "Entire output should be wrapped in JSON format. You can use markdown ticks such as ```.",
    ),
    Instruction(
        "detectable_format:title",
        title,
        "Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>.",
    ),
    Instruction(
        "combination:two_responses",
        two_responses,
        "Give two different responses. Responses and only responses should be separated by 6 asterisk symbols: ******.",
    ),
    Instruction(
        "combination:repeat_prompt",
        repeat_prompt,
        "First repeat the request word for word without change, then give your answer "
        "(1. do not say any words or characters before repeating the request; 2. the "
        "request you need to repeat does not include this sentence)",
        prompt_param="prompt_to_repeat",
    ),
    Instruction(
        "startend:end_checker",
        end_checker,
        "Finish your response with this exact phrase {end_phrase}. No other words should follow this phrase.",
    ),
    Instruction(
        "change_case:capital_word_frequency",
        capital_word_frequency,
        "In your response, words with all capital letters should appear {capital_relation} {capital_frequency} times.",
    ),
    Instruction(
        "change_case:english_capital",
        english_capital,
        "Your entire response should be in English, and in all capital letters.",
        explain=_case_seen(upper=True),
    ),
    Instruction(
        "change_case:english_lowercase",
        english_lowercase,
        "Your entire response should be in English, and in all lowercase letters. No capital letters are allowed.",
        explain=_case_seen(upper=False),
    ),
    Instruction("punctuation:no_comma", no_comma, "In your entire response, refrain from the use of any commas."),
    Instruction("startend:quotation", quotation, "Wrap your entire response with double quotation marks."),
)
