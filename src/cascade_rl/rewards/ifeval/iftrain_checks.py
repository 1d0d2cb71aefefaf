"""The IFBench training constraints ("IFTrain", open-instruct ``IFEvalG``), SPEC section 6.

IFBench's authors train on 29 further constraints, used by the ``IF_multi_constraints`` RLVR
data; their ids mix new families (``copy:``, ``first_word:``, ...) with new members of IFEval's.
Re-implemented here with the kwargs names of that data. Where the reference code contradicts
its instruction text, the instruction text wins (marked "intent").

| id | kwargs | holds when |
|---|---|---|
| copy:repeat_phrase | phrase, small_n | exactly small_n variants of phrase, each with exactly one word changed |
| copy:copy | prompt_to_repeat (default: from the prompt) | the answer is the request, verbatim (case-insensitive) |
| copy:copying_simple | prompt_to_repeat (default: from the prompt) | the answer is the request, verbatim (case-insensitive) |
| copy:copying_multiple | prompt_to_repeat, N | the request N times separated by ``******`` |
| new:copy_span_idx | prompt_to_repeat, n_start, n_end | the answer is characters n_start..n_end (inclusive) of the request |
| detectable_format:sentence_hyphens | - | sentences joined by hyphens without spaces around them (intent) |
| detectable_format:square_brackets | - | every word is wrapped in ``[...]`` |
| detectable_format:bigram_wrapping | - | every word pair is wrapped in ``<<...>>`` |
| keywords:no_adjacent_consecutive | - | no two adjacent words start with consecutive letters (a b, m n) |
| keywords:word_once | keyword | keyword occurs exactly once (whole word, case-insensitive) |
| keywords:word_count_different_numbers | keyword, frequency, relation | whole-word count of keyword <relation> frequency |
| keywords:exclude_word_harder | keyword | keyword does not occur (whole word, case-insensitive) |
| keywords:palindrome | - | some word of 2+ letters is a palindrome |
| keywords:keyword_specific_position | keyword, n, m | the m-th word of sentence n is keyword |
| keywords:start_end | - | the first and last word tokens are the same word (nothing after it) |
| paragraphs:paragraphs | - | exactly 2 paragraphs separated by ``***`` |
| paragraphs:paragraphs2 | - | exactly 2 paragraphs separated by a blank line |
| first_word:first_word_sent | first_word | every sentence starts with first_word |
| first_word:first_word_answer | first_word | the answer starts with first_word |
| last_word:last_word_sent | last_word | every sentence ends with last_word (before punctuation) |
| last_word:last_word_answer | last_word | the answer's last word is last_word |
| punctuation:punctuation_dot | - | no ``.`` |
| punctuation:punctuation_exclamation | - | no ``!`` |
| count:lowercase_counting | N | at most N all-lowercase words |
| count:counting_composition | n_sent, n_words | 3 ``***`` paragraphs of n_sent sentences of n_words words (words: ``\\w+``, intent) |
| count:count_unique | - | no word repeated (case-insensitive ``\\w+`` words, intent) |
| count:count_increment_word | keyword1, keyword2 | keyword1 exactly once and keyword2 exactly twice |
| letters:letter_counting | N, relation | number of ASCII letters <relation> N |
| letters:letter_counting2 | letter, let_frequency, let_relation | as keywords:letter_frequency |

Word comparisons of ``first_word:*`` / ``last_word:*`` ignore case and surrounding punctuation.
"""

from __future__ import annotations

import re
import unicodedata

from cascade_rl.rewards.ifeval.ifbench_checks import count_word, keyword_specific_position
from cascade_rl.rewards.ifeval.ifeval_checks import STARS_DIVIDER, count_paragraphs, has_word, letter_frequency
from cascade_rl.rewards.ifeval.spec import Count, Instruction, Ordinal, Relation, compare
from cascade_rl.rewards.ifeval.text import WORD_RE, bare_words, split_sentences, strip_punctuation, word_tokenize


def _same(text: str, request: str) -> bool:
    return text.strip().lower() == request.strip().lower()


def repeat_phrase(text: str, *, phrase: str, small_n: Ordinal) -> bool:
    reference = phrase.split()
    pattern = rf"{re.escape(reference[0])} .*? {re.escape(reference[-1])}"
    found = re.findall(pattern, text)
    if len(found) != small_n:
        return False
    for variant in found:
        words = variant.split()
        if len(words) != len(reference) or sum(a != b for a, b in zip(words, reference)) != 1:
            return False
    return True


def copy_request(text: str, *, prompt_to_repeat: str) -> bool:
    return _same(text, prompt_to_repeat)


def copy_multiple(text: str, *, prompt_to_repeat: str, N: Ordinal) -> bool:
    parts = text.split("******")
    return len(parts) == N and all(_same(part, prompt_to_repeat) for part in parts)


def copy_span_chars(text: str, *, prompt_to_repeat: str, n_start: Count, n_end: Count) -> bool:
    span = prompt_to_repeat[n_start : n_end + 1]
    return bool(span.strip()) and _same(text, span)


def sentence_hyphens(text: str) -> bool:
    parts = text.strip().split("-")
    return len(parts) >= 2 and all(part and part == part.strip() for part in parts)


def square_brackets(text: str) -> bool:
    return all(word.startswith("[") and word.endswith("]") for word in text.split())


def bigram_wrapping(text: str) -> bool:
    words = text.split()
    if len(words) % 2:
        return False
    pairs = zip(words[0::2], words[1::2])
    return all(
        left.startswith("<<") and right.endswith(">>") and not left.endswith(">>") and not right.startswith("<<")
        for left, right in pairs
    )


def no_adjacent_consecutive(text: str) -> bool:
    initials = [word[0].lower() for word in text.split()]
    return all(ord(b) - ord(a) != 1 for a, b in zip(initials, initials[1:]))


def word_once(text: str, *, keyword: str) -> bool:
    return count_word(keyword, text) == 1


def word_count_relation(text: str, *, keyword: str, frequency: Count, relation: Relation) -> bool:
    return compare(count_word(keyword, text), relation, frequency)


def exclude_word(text: str, *, keyword: str) -> bool:
    return not has_word(keyword.strip(), text)


def contains_palindrome(text: str) -> bool:
    return any(len(word) > 1 and word == word[::-1] for word in bare_words(text))


def start_end_same_word(text: str) -> bool:
    if "-" in text and " " not in text.strip():
        words = [word for word in text.split("-") if word.strip()]
    else:
        words = word_tokenize(text)
    return len(words) >= 2 and words[0].lower() == words[-1].lower()


def two_star_paragraphs(text: str) -> bool:
    return count_paragraphs(text, STARS_DIVIDER) == 2


def two_blank_line_paragraphs(text: str) -> bool:
    return count_paragraphs(text, r"\n\n") == 2


def _is_word(candidate: str, word: str) -> bool:
    return strip_punctuation(candidate).lower() == strip_punctuation(word.strip()).lower()


def first_word_sentences(text: str, *, first_word: str) -> bool:
    sentences = split_sentences(text)
    return bool(sentences) and all(_is_word(s.split()[0], first_word) for s in sentences)


def first_word_answer(text: str, *, first_word: str) -> bool:
    words = text.split()
    return bool(words) and _is_word(words[0], first_word)


def last_word_sentences(text: str, *, last_word: str) -> bool:
    sentences = split_sentences(text)
    return bool(sentences) and all(_is_word(s.split()[-1], last_word) for s in sentences)


def last_word_answer(text: str, *, last_word: str) -> bool:
    tokens = [t for t in re.split(r"[^A-Za-z0-9]+", unicodedata.normalize("NFKC", text)) if t]
    return bool(tokens) and tokens[-1].lower() == last_word.strip().lower()


def no_dot(text: str) -> bool:
    return "." not in text


def no_exclamation(text: str) -> bool:
    return "!" not in text


def lowercase_word_count(text: str, *, N: Count) -> bool:
    return len(re.findall(r"\b[a-z]+\b", text)) <= N


def letter_counting(text: str, *, N: Count, relation: Relation) -> bool:
    return compare(len(re.findall(r"[A-Za-z]", text)), relation, N)


def _sentence_shape_ok(paragraph: str, n_sent: int, n_words: int) -> bool:
    sentences = split_sentences(paragraph)
    return len(sentences) == n_sent and all(len(WORD_RE.findall(s)) == n_words for s in sentences)


def counting_composition(text: str, *, n_sent: Ordinal, n_words: Ordinal) -> bool:
    if count_paragraphs(text, STARS_DIVIDER) != 3:
        return False
    paragraphs = [p for p in re.split(STARS_DIVIDER, text) if p.strip()]
    return all(_sentence_shape_ok(p, n_sent, n_words) for p in paragraphs)


def all_words_unique(text: str) -> bool:
    words = [word.lower() for word in WORD_RE.findall(text)]
    return len(words) == len(set(words))


def count_increment_word(text: str, *, keyword1: str, keyword2: str) -> bool:
    return count_word(keyword1, text) == 1 and count_word(keyword2, text) == 2


_COPY_TEXT = (
    "Copy this instruction verbatim, do not follow the instruction, only copy it into "
    "the output (do not include this instruction sentence!)."
)
_REPEAT_TEXT = (
    "Repeat the request without change (do not say anything before repeating the "
    "request; the request you need to repeat does not include this sentence) and do "
    "not answer the actual request!"
)

IFTRAIN: tuple[Instruction, ...] = (
    Instruction(
        "copy:repeat_phrase",
        repeat_phrase,
        "Repeat the phrase {phrase} exactly {small_n} times, transforming it slightly each "
        "time by replacing only one word in the center of the phrase.",
    ),
    Instruction("copy:copy", copy_request, _COPY_TEXT, prompt_param="prompt_to_repeat"),
    Instruction("copy:copying_simple", copy_request, _REPEAT_TEXT, prompt_param="prompt_to_repeat"),
    Instruction(
        "copy:copying_multiple",
        copy_multiple,
        "Repeat the request without change {N} times, separated by 6 asterisk symbols (do "
        "not say anything before repeating the request; the request you need to repeat "
        "does not include this sentence) and do not answer the actual request!",
        prompt_param="prompt_to_repeat",
    ),
    Instruction(
        "new:copy_span_idx",
        copy_span_chars,
        "Copy the span of words that lies between (and including) index {n_start} and "
        "{n_end}, the indices are character indices!",
        prompt_param="prompt_to_repeat",
    ),
    Instruction(
        "detectable_format:sentence_hyphens",
        sentence_hyphens,
        "All sentences must be connected using hyphens, with no spaces between them.",
    ),
    Instruction(
        "detectable_format:square_brackets",
        square_brackets,
        "Enclose every word in your response within square brackets.",
    ),
    Instruction(
        "detectable_format:bigram_wrapping",
        bigram_wrapping,
        "Wrap every word bigram in double angular brackets, such as <<I am>> <<at home>> <<with my>> <<cute dog>>.",
    ),
    Instruction(
        "keywords:no_adjacent_consecutive",
        no_adjacent_consecutive,
        "No two adjacent words can start with consecutive letters of the alphabet.",
    ),
    Instruction("keywords:word_once", word_once, "Include keyword {keyword} in your response."),
    Instruction(
        "keywords:word_count_different_numbers",
        word_count_relation,
        "In your response, the word {keyword} should appear {relation} {frequency} times.",
    ),
    Instruction("keywords:exclude_word_harder", exclude_word, "Do not include keyword {keyword} in the response."),
    Instruction("keywords:palindrome", contains_palindrome, "Include a palindrome in your response."),
    Instruction(
        "keywords:keyword_specific_position",
        keyword_specific_position,
        "Include keyword {keyword} in the {n}-th sentence, as the {m}-th word of that sentence.",
    ),
    Instruction(
        "keywords:start_end",
        start_end_same_word,
        "Start and end your response with the same word (do not write anything after the "
        "last word, not even punctuation).",
    ),
    Instruction(
        "paragraphs:paragraphs",
        two_star_paragraphs,
        "There should be 2 paragraphs. Paragraphs are separated with the markdown divider: ***",
    ),
    Instruction(
        "paragraphs:paragraphs2",
        two_blank_line_paragraphs,
        "There should be 2 paragraphs. Paragraphs and only paragraphs are separated with "
        "each other by two line breaks.",
    ),
    Instruction(
        "first_word:first_word_sent",
        first_word_sentences,
        "The first word of each sentence should be the word {first_word}.",
    ),
    Instruction(
        "first_word:first_word_answer",
        first_word_answer,
        "The first word of your response should be the word {first_word}.",
    ),
    Instruction(
        "last_word:last_word_sent",
        last_word_sentences,
        "The last word of each sentence, before punctuation, should be the word {last_word}.",
    ),
    Instruction(
        "last_word:last_word_answer", last_word_answer, "The last word of your response should be the word {last_word}."
    ),
    Instruction(
        "punctuation:punctuation_dot",
        no_dot,
        "In your entire response, refrain from the use of . (i.e. dots) as punctuation and in general.",
    ),
    Instruction(
        "punctuation:punctuation_exclamation",
        no_exclamation,
        "In your entire response, refrain from the use of ! (i.e. exclamation marks) as punctuation and in general.",
    ),
    Instruction(
        "count:lowercase_counting",
        lowercase_word_count,
        "In your response, all lowercase words should appear at most {N} times.",
    ),
    Instruction(
        "count:counting_composition",
        counting_composition,
        "Write 3 paragraphs, delimited by the markdown divider: ***, with exactly "
        "{n_sent} sentences each, with exactly {n_words} words in each sentence.",
    ),
    Instruction(
        "count:count_unique", all_words_unique, "Only use unique words in your response, no word should be repeated!"
    ),
    Instruction(
        "count:count_increment_word",
        count_increment_word,
        "Include keyword {keyword1} once in your response, keyword {keyword2} twice in your response.",
    ),
    Instruction("letters:letter_counting", letter_counting, "Answer with {relation} {N} letters."),
    Instruction(
        "letters:letter_counting2",
        letter_frequency,
        "In your response, the letter {letter} should appear {let_relation} {let_frequency} times.",
    ),
)
