"""The IFBench constraints (allenai/IFBench ``instructions.py``), SPEC section 6.

Stage 2 of IF-RL moves to the harder IFBench taxonomy, and IFBench is a benchmark of the
evaluation. These checkers re-implement the ``check_following`` of the official evaluator
(allenai/IFBench, ``instructions.py`` as of its word-index fix of ``repeat:repeat_span``, with
``instructions_util.py`` splitting sentences with NLTK's Punkt), with the kwargs names of its
data: all 58 ids of its registry, the 57 of ``IFBench_test.jsonl`` among them. Where the official
code does not do what its instruction text says, the official behaviour is followed, so that
accuracies compare with published ones; each such quirk is named in the checker's docstring and
in docs/evaluation.md ("IFBench: official quirks followed").

Sentences and word tokens come from :mod:`.text` (NLTK-free; it documents how it differs from
Punkt and the Treebank tokenizer). Three official dependencies are approximated offline:
``words:start_verb`` (NLTK's perceptron POS tagger, whose model cannot be downloaded here) reads
the first token with a verb lexicon and verb morphology; ``words:odd_even_syllables`` counts
syllables with ``syllapy``'s rules (``syllapy`` itself when installed); ``format:emoji`` uses
Unicode's single-code-point emoji (the ``emoji`` package's ``is_emoji``).

| id | kwargs | holds when |
|---|---|---|
| count:word_count_range | min_words, max_words | min_words <= ``\\w+`` count <= max_words |
| count:unique_word_count | N | at least N distinct words (lower-cased, punctuation stripped; a punctuation-only token counts once as the empty word) |
| count:conjunctions | small_n | at least small_n distinct raw tokens that are coordinating conjunctions (and but for nor or so yet) once stripped (``and`` and ``And,`` are two) |
| count:person_names | N | at least N distinct names from IFBench's list of 50 |
| count:numbers | N | exactly N digit runs (punctuation removed first) |
| count:punctuation | - | uses . , ! ? ; : and an interrobang (?! !? ‽) |
| count:pronouns | N | at least N pronoun tokens |
| count:words_japanese | N | every N-th word (non-numeric) contains Japanese script |
| count:keywords_multiple | keyword1, keyword2, keyword3, keyword4, keyword5 | whole-word counts exactly 1, 2, 3, 5, 7 |
| ratio:stop_words | percentage | stop words are at most percentage % of words |
| ratio:sentence_type | - | sentences ending "." = 2 x sentences ending "?" |
| ratio:sentence_balance | - | as many "." as "?" as "!" sentences |
| ratio:overlap | reference_text, percentage | word-trigram overlap with reference_text within percentage +- 2 % |
| ratio:sentence_words | - | exactly 3 sentences, same length in characters, no word repeated |
| words:alphabet | - | word initials follow the alphabet, wrapping z -> a |
| words:vowel | - | one paragraph (no line break) using at most 3 distinct vowels |
| words:consonants | - | every word has two adjacent consonants |
| words:palindrome | - | at least 10 palindromic words of 5+ letters |
| words:prime_lengths | - | every word (punctuation removed) has a prime length |
| words:start_verb | - | the first word token is a verb (lexicon and morphology for NLTK's POS tagger) |
| words:repeats | small_n | no word occurs more than small_n times |
| words:odd_even_syllables | - | words alternate odd / even syllable counts (``syllapy``'s rules) |
| words:last_first | - | each sentence starts with the previous sentence's last word |
| words:paragraph_last_first | - | every line starts and ends with the same word |
| words:no_consecutive | - | no two consecutive words share a first letter |
| words:keywords_specific_position | keyword, n, m | the m-th word of sentence n is keyword |
| words:words_position | keyword | the second and the second-to-last words are keyword |
| sentence:alliteration_increment | - | each sentence has a longer alliterative run than the one before |
| sentence:keyword | word, N | sentence N contains word (whole word, case-insensitive) |
| sentence:increment | small_n | each sentence has exactly small_n more words than the one before |
| format:parentheses | - | brackets ( [ { nested at least 5 deep and closed |
| format:quotes | - | quotes nested 3 deep, alternating " and ' |
| format:options | options | the answer is exactly one of the options ("a/b/c", "x or y", "a), b)") |
| format:newline | - | one word per line |
| format:emoji | - | every sentence ends with an emoji |
| format:line_indent | - | every line is indented more than the one before (blank lines dropped as IFBench does) |
| format:quote_unquote | - | no two ASCII ``"`` back to back (whitespace removed), the text does not end with one |
| format:list | sep | sep occurs at least twice anywhere in the text |
| format:thesis | - | an ``<i>``/``<em>`` thesis followed by text (IFBench's offsets) |
| format:sub-bullets | - | every piece of the text after a ``*`` contains a ``-`` (no ``*`` at all passes) |
| format:no_bullets_bullets | - | lines of at least two sentences (a blank line ends them), then at least two ``*`` lines, nothing after |
| format:title_case | - | every word token is capitalised |
| format:output_template | - | contains "My Answer:", "My Conclusion:" and "Future Outlook:" |
| format:no_whitespace | - | no whitespace at all |
| repeat:repeat_change | prompt_to_repeat (default: from the prompt) | the request's words after the first, and not the request verbatim |
| repeat:repeat_simple | - | exactly the sentence "Only output this sentence here, ignore all other requests." |
| repeat:repeat_span | prompt_to_repeat, n_start, n_end | exactly words n_start..n_end (inclusive, whitespace split) of the request |
| custom:multiples | - | the numbers are exactly 14 21 28 35 42 49 |
| custom:mcq_count_length | - | 4 "Question N" blocks with 5 options each, growing in length |
| custom:reverse_newline | - | from "Zimbabwe" on, >= 52 lines in reverse alphabetical order |
| custom:word_reverse | - | the words reversed contain "bald eagle" and are one sentence |
| custom:character_reverse | - | contains "elgae dlab" |
| custom:sentence_alphabet | - | 26 sentences starting with a..z |
| custom:european_capitals_sort | - | IFBench's 27 capitals, comma separated, north to south |
| custom:csv_city | - | CSV (unstripped) with header ID,Country,City,Year,Count and 7 rows of 5 fields |
| custom:csv_special_character | - | CSV header ProductID,Category,Brand,Price,Stock, 14 rows, a quoted field with a special character (IFBench's reading) |
| custom:csv_quotes | - | tab-separated header StudentID..Score and 3 rows, every field in double quotes (IFBench's reading) |
| custom:date_format_list | - | comma-separated valid YYYY-MM-DD dates between 1769 and 1821 |

**Why one file of about 1,080 lines** (DESIGN.md: files over ~500 lines say why): it mirrors
one official file, IFBench's ``instructions.py``: one checker per instruction id, in the same
order, so each can be compared with the official code side by side.
"""

from __future__ import annotations

import csv
import io
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Mapping
from typing import Any

from cascade_rl.rewards.ifeval.ifeval_checks import has_word
from cascade_rl.rewards.ifeval.spec import Count, Instruction, Ordinal, Percentage
from cascade_rl.rewards.ifeval.text import (
    PUNCTUATION,
    alnum_tokens,
    bare_words,
    count_stop_words,
    count_syllables,
    count_words,
    is_emoji,
    remove_punctuation,
    split_sentences,
    strip_punctuation,
    word_tokenize,
)

CONJUNCTIONS = frozenset({"and", "but", "for", "nor", "or", "so", "yet"})
PERSON_NAMES = (
    "Emma",
    "Liam",
    "Sophia",
    "Jackson",
    "Olivia",
    "Noah",
    "Ava",
    "Lucas",
    "Isabella",
    "Mason",
    "Mia",
    "Ethan",
    "Charlotte",
    "Alexander",
    "Amelia",
    "Benjamin",
    "Harper",
    "Leo",
    "Zoe",
    "Daniel",
    "Chloe",
    "Samuel",
    "Lily",
    "Matthew",
    "Grace",
    "Owen",
    "Abigail",
    "Gabriel",
    "Ella",
    "Jacob",
    "Scarlett",
    "Nathan",
    "Victoria",
    "Elijah",
    "Layla",
    "Nicholas",
    "Audrey",
    "David",
    "Hannah",
    "Christopher",
    "Penelope",
    "Thomas",
    "Nora",
    "Andrew",
    "Aria",
    "Joseph",
    "Claire",
    "Ryan",
    "Stella",
    "Jonathan",
)
PRONOUNS = frozenset(
    """
i me we us you he him she her it they them my mine our ours your yours his hers its their theirs
myself ourselves yourself yourselves himself herself itself themselves this that these those who
whom whose which what whoever whomever whatever whichever anybody anyone anything everybody
everyone everything nobody nothing somebody someone something each either neither both all some
any none
""".split()
)
EUROPEAN_CAPITALS = (
    "Reykjavik",
    "Helsinki",
    "Oslo",
    "Tallinn",
    "Stockholm",
    "Riga",
    "Moscow",
    "Copenhagen",
    "Vilnius",
    "Minsk",
    "Dublin",
    "Berlin",
    "Amsterdam",
    "Warsaw",
    "London",
    "Brussels",
    "Prague",
    "Luxembourg",
    "Paris",
    "Vienna",
    "Bratislava",
    "Budapest",
    "Vaduz",
    "Chisinau",
    "Bern",
    "Ljubljana",
    "Zagreb",
)
REPEAT_SIMPLE_SENTENCE = "Only output this sentence here, ignore all other requests."
_PRIMES = frozenset(n for n in range(2, 100) if all(n % d for d in range(2, int(n**0.5) + 1)))
_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")
_VOWELS = frozenset("aeiou")


# --- counts ----------------------------------------------------------------------------------


def word_count_range(text: str, *, min_words: Count, max_words: Count) -> bool:
    return min_words <= count_words(text) <= max_words


def unique_word_count(text: str, *, N: Count) -> bool:
    """Quirk: a token made only of punctuation (``-``, ``...``) counts as the empty word."""
    return len({strip_punctuation(word) for word in text.lower().split()}) >= N


def conjunction_count(text: str, *, small_n: Count) -> bool:
    """Quirk: distinct *raw* tokens are counted, so ``and`` and ``And,`` are two conjunctions."""
    used = {word for word in text.split() if strip_punctuation(word).lower() in CONJUNCTIONS}
    return len(used) >= small_n


def person_name_count(text: str, *, N: Count) -> bool:
    return sum(1 for name in PERSON_NAMES if re.search(rf"\b{name}\b", text)) >= N


def numbers_count(text: str, *, N: Count) -> bool:
    return len(re.findall(r"\d+", remove_punctuation(text))) == N


def punctuation_cover(text: str) -> bool:
    if not ("?!" in text or "!?" in text or "‽" in text):
        return False
    rest = text.replace("?!", "", 1) if "?!" in text else text.replace("!?", "", 1)
    return set(".,!?;:") <= set(rest)


def pronoun_count(text: str, *, N: Count) -> bool:
    tokens = word_tokenize(text.replace("/", " ").lower())
    return sum(1 for token in tokens if token in PRONOUNS) >= N


def nth_word_japanese(text: str, *, N: Ordinal) -> bool:
    for position, word in enumerate(text.split(), start=1):
        word = strip_punctuation(word)
        if position % N == 0 and word and not word.isdigit() and not _JAPANESE.search(word):
            return False
    return True


def keywords_multiple(text: str, *, keyword1: str, keyword2: str, keyword3: str, keyword4: str, keyword5: str) -> bool:
    wanted = zip((keyword1, keyword2, keyword3, keyword4, keyword5), (1, 2, 3, 5, 7))
    return all(count_word(keyword, text) == times for keyword, times in wanted)


def count_word(word: str, text: str) -> int:
    """Whole-word, case-insensitive occurrences of ``word``."""
    return len(re.findall(r"\b" + re.escape(word.strip()) + r"\b", text, flags=re.IGNORECASE))


# --- ratios ----------------------------------------------------------------------------------


def stop_words_ratio(text: str, *, percentage: Percentage) -> bool:
    words = count_words(text)
    return words > 0 and count_stop_words(text) / words * 100 <= percentage


def _ending_counts(text: str) -> Counter:
    return Counter(sentence[-1] for sentence in split_sentences(text))


def sentence_type_ratio(text: str) -> bool:
    endings = _ending_counts(text)
    return endings["."] == 2 * endings["?"]


def sentence_balance(text: str) -> bool:
    endings = _ending_counts(text)
    return endings["."] == endings["?"] == endings["!"]


def _trigrams(text: str) -> set[tuple[str, ...]]:
    tokens = word_tokenize(text)
    return set(zip(tokens, tokens[1:], tokens[2:]))


def ngram_overlap(text: str, *, reference_text: str, percentage: Percentage) -> bool:
    trigrams = _trigrams(text)
    if not trigrams:
        return False
    overlap = len(trigrams & _trigrams(reference_text)) / len(trigrams) * 100
    return percentage - 2 <= overlap <= percentage + 2


def sentence_words(text: str) -> bool:
    sentences = split_sentences(text)
    if len(sentences) != 3 or len({len(sentence.strip()) for sentence in sentences}) != 1:
        return False
    words = bare_words(" ".join(sentences))
    return len(words) == len(set(words))


# --- words -----------------------------------------------------------------------------------


def alphabet_loop(text: str) -> bool:
    words = [word.lower() for word in remove_punctuation(text).split()]
    if not words or not ("a" <= words[0][0] <= "z"):
        return False
    expected = words[0][0]
    for word in words[1:]:
        expected = chr((ord(expected) - ord("a") + 1) % 26 + ord("a"))
        if word[0] != expected:
            return False
    return True


def single_vowel_paragraph(text: str) -> bool:
    lines = text.strip().split("\n")
    return len(lines) == 1 and len(set(lines[0].lower()) & _VOWELS) <= 3


def _has_consonant_cluster(word: str) -> bool:
    return any(a in _CONSONANTS and b in _CONSONANTS for a, b in zip(word, word[1:]))


def consonant_clusters(text: str) -> bool:
    return all(_has_consonant_cluster(word) for word in text.lower().split())


def palindromes(text: str) -> bool:
    found = [w for w in bare_words(text) if len(w) >= 5 and w == w[::-1]]
    return len(found) >= 10


def prime_lengths(text: str) -> bool:
    return all(len(word) in _PRIMES for word in remove_punctuation(text).split())


def limited_repeats(text: str, *, small_n: Count) -> bool:
    counts = Counter(bare_words(text))
    return all(count <= small_n for count in counts.values())


def odd_even_syllables(text: str) -> bool:
    parities = [count_syllables(word) % 2 for word in bare_words(text)]
    return all(a != b for a, b in zip(parities, parities[1:]))


def last_word_first_next(text: str) -> bool:
    sentences = split_sentences(text)
    for current, following in zip(sentences, sentences[1:]):
        last = current.rstrip(PUNCTUATION + " ").split()
        first = following.lstrip(PUNCTUATION + " ").split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False
    return True


def paragraph_last_first(text: str) -> bool:
    for line in text.split("\n"):
        words = strip_punctuation(line.strip().lower()).split()
        if words and words[0] != words[-1]:
            return False
    return True


def no_consecutive_first_letter(text: str) -> bool:
    words = bare_words(text)
    return all(a[0] != b[0] for a, b in zip(words, words[1:]))


def keyword_specific_position(text: str, *, keyword: str, n: Ordinal, m: Ordinal) -> bool:
    sentences = split_sentences(text)
    if len(sentences) < n:
        return False
    words = alnum_tokens(sentences[n - 1])
    return len(words) >= m and words[m - 1].lower() == keyword.strip().lower()


def words_position(text: str, *, keyword: str) -> bool:
    words = [word.lower() for word in alnum_tokens(text)]
    return len(words) >= 2 and words[1] == words[-2] == keyword.strip().lower()


# IFBench asks NLTK's averaged-perceptron tagger for the tag of the first word token and wants a
# verb tag (VB, VBD, VBG, VBN, VBP, VBZ; a modal is MD, not a verb). The tagger's model cannot be
# downloaded here, so the first token is read with a lexicon: the forms of be / have / do, common
# verbs in their base form (how an imperative answer starts), then verb morphology.
_AUXILIARY_VERBS = frozenset(
    """
be is are was were am been being have has had having do does did done doing get gets got let lets
""".split()
)
_BASE_VERBS = frozenset(
    """
accept achieve act add address adjust adopt aim allow analyse analyze answer apply appreciate
approach arrange ask assess assume attach avoid bake be bear beat become begin believe boil boost
borrow break breathe bring build buy calculate call carry catch celebrate change check choose
cite clarify clean clear click close collect combine come compare compile complete compose
compute conceive concentrate conclude conduct confirm connect consider construct consult continue
convert cook copy count craft create cultivate cut dance decide define delete deliver demonstrate
describe design determine develop discover discuss dive divide do document draft draw dream drink
drive drop eat elevate embark embrace emphasize enable encourage engage enhance enjoy ensure enter
envision establish estimate evaluate examine exercise expand expect experience experiment explain
explore express extend face fall feed feel fight fill find finish fix fly focus fold follow forget
forgive form gather generate give go grab grasp greet grow guide handle hang hear help highlight
hold hope identify ignore illustrate imagine implement improve include increase indulge inspire
install integrate interpret introduce invent invest investigate invite join jump keep kick kill
know label launch lay lead learn leave lend let lift limit list listen live locate look lose love
maintain make manage map mark master measure meet memorize merge mind mix modify monitor move name
navigate need note notice observe obtain offer open order organize outline own paint pair pass pause
pay perform pick picture place plan plant play pour practice practise prepare present preserve
press prevent print prioritize proceed produce protect prove provide pull purchase push put raise
reach read realize rebuild recall receive recognize recommend record reduce refer reflect refuse
relax release rely remember remind remove repeat replace reply report request research reset
resolve respect respond rest restore retain return reveal review rewrite ride rinse rise run save
say schedule search see seek select sell send serve set settle share shift show shut sign simplify
sing sit sketch skip sleep slice solve sort speak spend split spread stand start state stay step
stick stir stop store strengthen stretch strive study submit suggest summarize supply support
suppose surround swim take talk taste teach tell test thank think throw track train transform
translate travel treat try turn type uncover understand unite unleash unlock update upgrade use
validate value verify view visit visualize wait wake walk want warm wash watch wear welcome win
wish withdraw wonder work worry wrap write yield
""".split()
)
# -ing / -ed words that are not verb forms (the tagger reads them as nouns, adjectives, ...)
_NOT_VERB_FORMS = frozenset(
    """
anything bed ceiling during everything evening hundred king morning nothing offspring red ring
seed shed sibling something speed spring string thing wedding wing
""".split()
)
_VERB_SUFFIXES = ("ize", "ise", "ify")


def starts_with_verb(text: str) -> bool:
    """Whether the first word token of ``text`` reads as a verb (see the lexicon above). A text
    starting with punctuation (``**``, ``#``, a quote) does not: its first token is a symbol."""
    tokens = word_tokenize(text)
    if not tokens or not tokens[0][:1].isalpha():
        return False
    word = tokens[0].lower()
    if word in _AUXILIARY_VERBS or word in _BASE_VERBS:
        return True
    if word in _NOT_VERB_FORMS or len(word) < 5:
        return False
    if word.endswith("ing") or word.endswith("ied") or word.endswith("ed") and word[-3] not in "e":
        return True
    return word.endswith(_VERB_SUFFIXES) and word not in {"size", "prize", "wise", "otherwise", "noise"}


# --- sentences -------------------------------------------------------------------------------


def _alliteration_run(sentence: str) -> int:
    """IFBench's alliteration score: words in runs of equal first letters (pairs count 2,
    each extension 1)."""
    words = [w for w in (word.lstrip(PUNCTUATION + " ") for word in sentence.lower().split()) if w]
    score, in_run = 0, False
    for a, b in zip(words, words[1:]):
        if a[0] == b[0]:
            score += 1 if in_run else 2
            in_run = True
        else:
            in_run = False
    return score


def alliteration_increment(text: str) -> bool:
    scores = [_alliteration_run(sentence) for sentence in split_sentences(text)]
    return all(b > a for a, b in zip([-1] + scores, scores))


def sentence_keyword(text: str, *, word: str, N: Ordinal) -> bool:
    sentences = split_sentences(text)
    return len(sentences) >= N and has_word(word.strip(), sentences[N - 1])


def sentence_increment(text: str, *, small_n: Count) -> bool:
    lengths = [len(remove_punctuation(sentence).split()) for sentence in split_sentences(text)]
    return bool(lengths) and all(b == a + small_n for a, b in zip(lengths, lengths[1:]))


# --- format ----------------------------------------------------------------------------------

_OPENERS = {")": "(", "]": "[", "}": "{"}


def nested_parentheses(text: str) -> bool:
    stack: list[str] = []
    deepest = 0
    for char in text:
        if char in "([{":
            stack.append(char)
            deepest = max(deepest, len(stack))
        elif char in _OPENERS:
            if stack and stack[-1] == _OPENERS[char]:
                stack.pop()
                if deepest >= 5:
                    return True
            else:
                stack, deepest = [], 0
    return False


def nested_quotes(text: str) -> bool:
    stack: list[str] = []
    deepest = 0
    for char in text:
        if stack and char == stack[-1]:
            stack.pop()
            if deepest - len(stack) >= 3:
                return True
        elif char in "\"'":
            stack.append(char)
            deepest = max(deepest, len(stack))
    return False


def options_response(text: str, *, options: str) -> bool:
    letters_only = re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options) is not None
    separator = "/" if "/" in options else "or" if "or" in options else ","
    choices = [option.strip() for option in options.split(separator)]
    if letters_only:
        return text in choices
    answer = strip_punctuation(text).lower()
    return any(strip_punctuation(choice).lower() == answer for choice in choices)


def newline_words(text: str) -> bool:
    bare = remove_punctuation(text).strip()
    lines = [line for line in bare.split("\n") if line]
    return len(lines) == len(bare.split())


def _ends_with_emoji(sentence: str) -> bool:
    bare = remove_punctuation(sentence).strip()
    return bool(bare) and (is_emoji(bare[-1]) or len(bare) > 1 and is_emoji(bare[-2]))


def emoji_sentences(text: str) -> bool:
    sentences = split_sentences(text)
    for index, sentence in enumerate(sentences):
        if not remove_punctuation(sentence).strip():
            return False
        if _ends_with_emoji(sentence):
            continue
        following = sentences[index + 1] if index + 1 < len(sentences) else ""
        following = remove_punctuation(following).strip()
        if not following or not is_emoji(following[0]):
            return False
    return True


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _drop_blank_lines_like_ifbench(lines: list[str]) -> list[str]:
    """IFBench removes blank lines from the list it is iterating over, so the blank line right
    after a removed one is skipped and stays: of two consecutive blank lines, one remains."""
    kept, skip_next = [], False
    for line in lines:
        if skip_next:
            kept.append(line)
            skip_next = False
        elif line.strip():
            kept.append(line)
        else:
            skip_next = True
    return kept


def indent_stairs(text: str) -> bool:
    """Quirk: two consecutive blank lines leave one blank (indent 0) line, which breaks the stairs."""
    lines = _drop_blank_lines_like_ifbench(text.split("\n"))
    return all(_indent(b) > _indent(a) for a, b in zip(lines, lines[1:]))


def quote_unquote(text: str) -> bool:
    """Quirk: typographic quotes (U+201C / U+201D) are not quotes here; IFBench's replacement of
    them with ``"`` became a no-op upstream, so only ASCII ``"`` counts."""
    compact = "".join(text.replace("'\"'", "").split())
    if '""' in compact:
        return False
    stripped = compact.strip("0123456789" + PUNCTUATION.replace('"', ""))
    return not (stripped and stripped[-1] == '"')


def special_bullets(text: str, *, sep: str) -> bool:
    """Quirk: ``sep`` must occur at least twice anywhere, not necessarily starting a line."""
    return len(re.findall(re.escape(sep), text)) >= 2


def italics_thesis(text: str) -> bool:
    """IFBench's reading: from the first ``<i>`` (else ``<em>``), the first ``</i>`` (else
    ``</em>``) closes the thesis. Quirk: the offsets are those of ``<i>``/``</i>``, so with
    ``<em>`` the thesis keeps a ``>`` and the text after it starts with ``>`` (never empty)."""
    start = text.find("<i>")
    if start == -1:
        start = text.find("<em>")
        if start == -1:
            return False
    rest = text[start:]
    end = rest.find("</i>")
    if end == -1:
        end = rest.find("</em>")
        if end == -1:
            return False
    return bool(rest[3:end].strip()) and bool(rest[end + 4 :].strip())


def sub_bullets(text: str) -> bool:
    """IFBench's reading of ``*``: the text is split at every ``*`` and each piece after the
    first must contain a ``-``. Quirks: a text without any ``*`` passes; a ``**bold**`` marker
    or a ``*`` inside a sentence counts as a bullet; the ``-`` may be anywhere (``well-known``)."""
    return all("-" in piece for piece in text.split("*")[1:])


def sentences_then_bullets(text: str) -> bool:
    """IFBench's line-by-line reading. Quirk: a blank line before the bullets ends the sentence
    part (IFBench reuses its flag for the sentence list, which is empty for a blank line), so a
    further sentence line fails; any line after the bullets, blank ones included, fails."""
    reading_sentences: bool = True
    sentences = bullets = 0
    for line in text.split("\n"):
        if line.strip().startswith("*"):
            reading_sentences = False
            if sentences < 2:
                return False
            bullets += 1
        elif reading_sentences:
            found = len(split_sentences(line.strip()))
            sentences += found
            reading_sentences = found > 0
        else:
            return False
    return bullets >= 2


def _title_cased(token: str) -> bool:
    """IFBench's title-case rule for one token (tokens not starting with a letter pass)."""
    if not token[0].isalpha():
        return True
    if len(token) == 1:
        return not token.islower()
    rest = token[1:]
    return not (token[0].islower() and (rest.isupper() or rest.islower()))


def title_case(text: str) -> bool:
    return all(_title_cased(token) for token in word_tokenize(text))


def output_template(text: str) -> bool:
    return all(label in text for label in ("My Answer:", "My Conclusion:", "Future Outlook:"))


def no_whitespace(text: str) -> bool:
    return not any(char.isspace() for char in text)


# --- repeat ----------------------------------------------------------------------------------


def repeat_change(text: str, *, prompt_to_repeat: str) -> bool:
    """IFBench's test: the words after the first are the request's and the text is not the
    request verbatim. Quirk: the first word itself need not change (a repeat that differs from
    the request only in spacing passes)."""
    if text == prompt_to_repeat:
        return False
    return prompt_to_repeat.split()[1:] == text.split()[1:]


def repeat_simple(text: str) -> bool:
    return text.strip().lower() == REPEAT_SIMPLE_SENTENCE.lower()


def repeat_span(text: str, *, prompt_to_repeat: str, n_start: Count, n_end: Count) -> bool:
    span = " ".join(prompt_to_repeat.split()[n_start : n_end + 1])
    return bool(span) and text.strip().lower() == span.lower()


# --- custom (fixed prompts) ------------------------------------------------------------------


def multiples_of_seven(text: str) -> bool:
    return re.findall(r"\d+", text.replace(",", ", ")) == [str(n) for n in range(14, 51, 7)]


_QUESTION_SPLIT = re.compile(r"\n*(?:Question \d+[.|):;]?\s*)")
_OPTION_LINE = re.compile(r"^[A-Ea-e][.|)]\s*\w+")


def _question_shape(block: str) -> tuple[int, int]:
    """(number of options, length of the question text) of one question block."""
    question, options = [], 0
    for line in block.split("\n"):
        if _OPTION_LINE.match(line.strip()):
            options += 1
        elif not options:
            question.append(line.strip())
    return options, len(" ".join(question).strip())


def multiple_choice_questions(text: str) -> bool:
    if not text.startswith("Question"):
        return False
    blocks = [block.strip() for block in _QUESTION_SPLIT.split(text) if block.strip()]
    if len(blocks) != 4:
        return False
    shapes = [_question_shape(block) for block in blocks]
    lengths = [length for _, length in shapes]
    return all(options == 5 for options, _ in shapes) and lengths == sorted(set(lengths))


def _ascii_fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def reverse_alphabetical_lines(text: str) -> bool:
    lines = [strip_punctuation(line) for line in text.split("\n") if strip_punctuation(line)]
    start = next((i for i, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < 52:
        return False
    folded = [_ascii_fold(line) for line in lines[start:]]
    return folded == sorted(folded, reverse=True)


def word_reverse(text: str) -> bool:
    """The words reversed contain "bald eagle" and (IFBench) read as one single sentence."""
    reversed_text = " ".join(reversed(remove_punctuation(text.lower().strip()).split()))
    return "bald eagle" in reversed_text and reversed_text in split_sentences(reversed_text)


def character_reverse(text: str) -> bool:
    return "elgae dlab" in text.lower()


def sentence_alphabet(text: str) -> bool:
    sentences = split_sentences(text)
    if len(sentences) != 26:
        return False
    starts = [sentence.lstrip(PUNCTUATION + string.whitespace)[:1].lower() for sentence in sentences]
    return starts == [chr(ord("a") + i) for i in range(26)]


def european_capitals(text: str) -> bool:
    capitals = [item.strip() for item in _ascii_fold(text).split(",") if item.strip()]
    return capitals == list(EUROPEAN_CAPITALS)


def _csv_rows(text: str, delimiter: str = ",") -> list[list[str]]:
    """Rows of ``text`` as Python's csv module reads them; the text is not stripped, so a
    trailing blank line is an (empty) row, as in IFBench."""
    return list(csv.reader(io.StringIO(text), delimiter=delimiter))


def csv_city(text: str) -> bool:
    """Quirk: read unstripped, so a blank line after the data makes a 9th row (strict fails)."""
    rows = _csv_rows(text)
    return (
        len(rows) == 8
        and rows[0] == ["ID", "Country", "City", "Year", "Count"]
        and all(len(row) == 5 for row in rows[1:])
    )


_PRODUCT_HEADER = re.compile(
    r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ \t]*(Brand|"Brand"),'
    r'[ \t]*(Price|"Price"),[ \t]*(Stock|"Stock")$'
)
_SPECIAL_QUOTED = re.compile(r'".*[^\d\w\s].*"')


def csv_special_character(text: str) -> bool:
    """IFBench's reading: the first line is the header; every ``"`` is tripled before csv
    parsing, so a quoted field keeps its quotes; 14 rows of 5 fields. Quirk: rows are checked in
    order and the first row with a quoted field holding a special character decides (True), so
    later rows are not checked for 5 fields."""
    if not _PRODUCT_HEADER.match(text.split("\n")[0].strip()):
        return False
    rows = _csv_rows(text.replace('"', '"""'))
    if len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(_SPECIAL_QUOTED.match(field) for field in row):
            return True
    return False


_STUDENT_HEADER = re.compile(
    r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t *(Grade|"Grade")\t *(Semester|"Semester")\t *(Score|"Score")$'
)


def csv_quotes(text: str) -> bool:
    """IFBench's reading: header line (fields quoted or not), then the text with every ``"``
    tripled read as tab-separated csv: exactly 4 rows of 5 fields, each field (stripped) starting
    and ending with ``"``. An empty field fails (IFBench raises there)."""
    if not _STUDENT_HEADER.match(text.split("\n")[0].strip()):
        return False
    rows = _csv_rows(text.replace('"', '"""'), delimiter="\t")
    if len(rows) != 4:
        return False
    for row in rows:
        fields = [field.strip() for field in row]
        if len(fields) != 5 or not all(field and field[0] == field[-1] == '"' for field in fields):
            return False
    return True


_MONTH_DAYS = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


def _napoleonic_date(item: str) -> bool:
    match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", item.strip())
    if not match:
        return False
    year, month, day = (int(part) for part in match.groups())
    return 1769 <= year <= 1821 and month <= 12 and day <= _MONTH_DAYS.get(month, 31)


def date_format_list(text: str) -> bool:
    return all(_napoleonic_date(item) for item in text.strip().split(","))


def _options_description(arguments: Mapping[str, Any]) -> str:
    return f"Answer with one of the following options: {arguments['options']}. Do not give any explanation."


IFBENCH: tuple[Instruction, ...] = (
    Instruction(
        "count:word_count_range",
        word_count_range,
        "The response must contain between {min_words} and {max_words} words.",
    ),
    Instruction("count:unique_word_count", unique_word_count, "Use at least {N} unique words in the response."),
    Instruction(
        "count:conjunctions",
        conjunction_count,
        "Use at least {small_n} different coordinating conjunctions in the response.",
    ),
    Instruction(
        "count:person_names",
        person_name_count,
        "Mention at least {N} different person names in the response, from this list of "
        "person names: " + ", ".join(PERSON_NAMES) + ".",
    ),
    Instruction("count:numbers", numbers_count, "Include exactly {N} numbers in the response."),
    Instruction(
        "count:punctuation",
        punctuation_cover,
        "Use every standard punctuation mark at least once, including semicolons, colons, and the interrobang (?!).",
    ),
    Instruction("count:pronouns", pronoun_count, "The response should include at least {N} pronouns."),
    Instruction("count:words_japanese", nth_word_japanese, "Every {N}-th word of your response must be in Japanese."),
    Instruction(
        "count:keywords_multiple",
        keywords_multiple,
        "Include keyword {keyword1} once in your response, keyword {keyword2} twice in "
        "your response, keyword {keyword3} three times in your response, keyword "
        "{keyword4} five times in your response, and keyword {keyword5} seven times in "
        "your response.",
    ),
    Instruction(
        "ratio:stop_words",
        stop_words_ratio,
        "Ensure that stop words constitute no more than {percentage:g}% of the total words in your response.",
    ),
    Instruction(
        "ratio:sentence_type", sentence_type_ratio, "Maintain a 2:1 ratio of declarative to interrogative sentences."
    ),
    Instruction(
        "ratio:sentence_balance",
        sentence_balance,
        "Ensure that the ratio of sentence types (declarative, interrogative, exclamatory) is balanced.",
    ),
    Instruction(
        "ratio:overlap",
        ngram_overlap,
        "Maintain a trigram overlap of {percentage:g}% (±2%) with the provided reference text: {reference_text}",
    ),
    Instruction(
        "ratio:sentence_words",
        sentence_words,
        "Respond with three sentences, all containing the same number of characters but using all different words.",
    ),
    Instruction(
        "words:alphabet",
        alphabet_loop,
        "Each word must start with the next letter of the alphabet, looping back to 'A' after 'Z'.",
    ),
    Instruction(
        "words:vowel", single_vowel_paragraph, "Write a paragraph using words that contain only three types of vowels."
    ),
    Instruction(
        "words:consonants",
        consonant_clusters,
        "Ensure each word in your response has at least one consonant cluster (two or more consonants together).",
    ),
    Instruction(
        "words:palindrome", palindromes, "Include at least 10 single-word palindromes, each at least 5 characters long."
    ),
    Instruction("words:prime_lengths", prime_lengths, "Use only words with lengths that are prime numbers."),
    Instruction("words:start_verb", starts_with_verb, "The response must start with a verb."),
    Instruction("words:repeats", limited_repeats, "The response should not repeat any word more than {small_n} times."),
    Instruction(
        "words:odd_even_syllables",
        odd_even_syllables,
        "Alternate between words with odd and even numbers of syllables.",
    ),
    Instruction(
        "words:last_first",
        last_word_first_next,
        "The last word of each sentence must become the first word of the next sentence.",
    ),
    Instruction(
        "words:paragraph_last_first",
        paragraph_last_first,
        "Each paragraph must end with the same word it started with, separate paragraphs with a newline.",
    ),
    Instruction(
        "words:no_consecutive", no_consecutive_first_letter, "No two consecutive words can share the same first letter."
    ),
    Instruction(
        "words:keywords_specific_position",
        keyword_specific_position,
        "Include keyword {keyword} in the {n}-th sentence, as the {m}-th word of that sentence.",
    ),
    Instruction(
        "words:words_position",
        words_position,
        "The second word in your response and the second to last word in your response should be the word {keyword}.",
    ),
    Instruction(
        "sentence:alliteration_increment",
        alliteration_increment,
        "Each sentence must have a longer sequence of consecutive alliterative words than the previous one.",
    ),
    Instruction(
        "sentence:keyword", sentence_keyword, 'The response must include keyword "{word}" in the {N}-th sentence.'
    ),
    Instruction(
        "sentence:increment",
        sentence_increment,
        "Each sentence must contain exactly {small_n} more words than the previous one.",
    ),
    Instruction(
        "format:parentheses",
        nested_parentheses,
        "Nest parentheses (and [brackets {{and braces}}]) at least 5 levels deep.",
    ),
    Instruction(
        "format:quotes",
        nested_quotes,
        "Include quotes within quotes within quotes, at least 3 levels deep, alternating "
        "between double quotes and single quotes.",
    ),
    Instruction("format:options", options_response, _options_description),
    Instruction("format:newline", newline_words, "Write each word on a new line."),
    Instruction("format:emoji", emoji_sentences, "Please use an emoji at the end of every sentence."),
    Instruction("format:line_indent", indent_stairs, "Create stairs by incrementally indenting each new line."),
    Instruction(
        "format:quote_unquote", quote_unquote, "Every quoted phrase must be followed by an unquoted explanation."
    ),
    Instruction("format:list", special_bullets, "Answer with a list of items, instead of bullet points use {sep}."),
    Instruction(
        "format:thesis",
        italics_thesis,
        "Each section must begin with a thesis statement in italics, use HTML to indicate the italics.",
    ),
    Instruction(
        "format:sub-bullets",
        sub_bullets,
        "Your response must include bullet points denoted by * and at least one "
        "sub-bullet point denoted by - for each bullet point.",
    ),
    Instruction(
        "format:no_bullets_bullets",
        sentences_then_bullets,
        "Your answer must contain at least two sentences ending in a period followed by "
        "at least two bullet points denoted by *.",
    ),
    Instruction(
        "format:title_case",
        title_case,
        "Write the entire response in title case (capitalize the first letter of every major word).",
    ),
    Instruction(
        "format:output_template",
        output_template,
        "Use this exact template for your response: My Answer: [answer] My Conclusion: "
        "[conclusion] Future Outlook: [outlook]",
    ),
    Instruction("format:no_whitespace", no_whitespace, "The output should not contain any whitespace."),
    Instruction(
        "repeat:repeat_change",
        repeat_change,
        "Repeat the request, but change the first word of the repeated request, (do not "
        "say anything before repeating the request; the request you need to repeat does "
        "not include this sentence) and do not answer the actual request! Request: "
        "{prompt_to_repeat}",
        prompt_param="prompt_to_repeat",
    ),
    Instruction("repeat:repeat_simple", repeat_simple, REPEAT_SIMPLE_SENTENCE),
    Instruction(
        "repeat:repeat_span",
        repeat_span,
        "Copy the span of words that lies between (and including) index {n_start} and "
        "{n_end}, the indices are word indices, split by whitespace!",
        prompt_param="prompt_to_repeat",
    ),
    Instruction("custom:multiples", multiples_of_seven, "Count from 10 to 50 but only print multiples of 7."),
    Instruction(
        "custom:mcq_count_length",
        multiple_choice_questions,
        "Generate 4 multiple choice questions with 5 options each about '20th century art "
        'history\'. Each question should start with the label "Question". The questions '
        "should get progressively longer. Do not provide an explanation.",
    ),
    Instruction(
        "custom:reverse_newline",
        reverse_alphabetical_lines,
        "List the countries of Africa in reverse alphabetical order, each on a new line.",
    ),
    Instruction(
        "custom:word_reverse",
        word_reverse,
        "What animal is the national symbol of the US? Respond to this query, but make "
        "your sentence in reverse order of what it should be, per word.",
    ),
    Instruction(
        "custom:character_reverse",
        character_reverse,
        "What animal is the national symbol of the US? Respond to this query, but make "
        "your sentence in reverse order of what it should be, per letter.",
    ),
    Instruction(
        "custom:sentence_alphabet",
        sentence_alphabet,
        "Tell me a 26-sentence story where each sentence's first word starts with the "
        "letters of the alphabet in order.",
    ),
    Instruction(
        "custom:european_capitals_sort",
        european_capitals,
        "Give me the names of all capital cities of european countries whose latitude is "
        "higher than than 45 degrees? List the capital cities without country names, "
        "separated by commas, sorted by latitude, from highest to lowest.",
    ),
    Instruction(
        "custom:csv_city",
        csv_city,
        'Generate CSV data: The column names are ["ID", "Country", "City", "Year", '
        '"Count"], the data should be comma delimited. Please generate 7 rows.',
    ),
    Instruction(
        "custom:csv_special_character",
        csv_special_character,
        'Generate CSV data: The column names are ["ProductID", "Category", "Brand", '
        '"Price", "Stock"], the data should be comma delimited. Please generate 14 '
        "rows. Add one field which contains a special character and enclose it in double "
        "quotes.",
    ),
    Instruction(
        "custom:csv_quotes",
        csv_quotes,
        'Generate CSV data: The column names are ["StudentID", "Subject", "Grade", '
        '"Semester", "Score"], the data should be tab delimited. Please generate 3 '
        "rows and enclose each single field in double quotes.",
    ),
    Instruction(
        "custom:date_format_list",
        date_format_list,
        "List the start dates of all the battles Napoleon fought separated by commas, use "
        "the following date format: YYYY-MM-DD. Do not provide an explanation.",
    ),
)
