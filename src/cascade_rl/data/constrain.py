"""IF-RL rows from real texts (SPEC section 6, IF-RL): ``cascade data constrain``.

IF-RL trains on prompts that carry verifiable constraints (the IFEval taxonomy, then the IFBench
training taxonomy). This module turns any text -- a GSM8K or MBPP training question, an RL
``prompt`` -- into such a row: the text, then one to a few constraints, each described with the
registry's own wording (:func:`cascade_rl.rewards.ifeval.build_description`), so the wording
the model reads and the checker that scores it are one declaration. Rows are ``ifeval``-domain
RL rows (docs/data-formats.md) with IFEval's ``instruction_id_list`` / ``kwargs``, plus
``base_text`` (the text the constraints were added to; decontaminate on it, see below) and
``base_id`` (where it came from).

**Drawing.** Each row's random generator is seeded with ``(seed, base text)``, so a row's
constraints do not depend on the other rows, ``--limit``, a resumed run or where the file lies. The number of
constraints is drawn in ``lo..hi`` with weights halving at each step (1-3: 57% / 29% / 14%,
IFEval's test set has 56% / 33% / 11%); instructions are drawn by weight (:data:`SPECS`) among
those compatible with the ones already chosen; kwargs come from ranges close to IFEval's but
smaller where a small model could not follow (e.g. word limits 30-250, not up to 1,200), and
keywords come from the base text's own content words or from :data:`WORDS` -- never from
IFEval's prompts.

**Conflicts** (:func:`compatible`). Two instructions are never drawn together when

* they are in one :data:`CONFLICT_GROUPS` group (they claim the same property of the answer:
  its case or language, its paragraph layout, its length, one letter's count, its last words),
* they are one of the :data:`CONFLICT_PAIRS` (a response in another language cannot contain
  English keywords; a first word cannot be a ``<<title>>``; ...), or
* one of them takes only a short list of companions (``only_with``): instructions that dictate
  the whole shape of the answer (JSON, two responses, repeating the request, copying, hyphen-
  joined sentences, ...) combine only with word-level constraints that cannot break that shape,
  or with none.

Then a row is kept only with a **witness**: :func:`satisfying_response` constructs an answer
that follows every drawn instruction and the registry's scorer must give it 1.0 (this catches
what a static table cannot: a ``less than 40 words`` limit with a request to repeat a 60-word
question, an end phrase with a dot under "no dots"). A combination without a witness is drawn
again (kwargs first, then the instructions); the summary counts these redraws per instruction.
So no row is unsatisfiable by construction.

**Decontamination.** The descriptions are IFEval's templates, and IFEval's test prompts often
quote them word for word ("Your entire response should be in English, and in all lowercase
letters..."): a 9-gram check of the whole prompt flags rows for sharing the template, not a
test instance. Decontaminate IF rows on their request: ``cascade data decontaminate OUT.jsonl
-b ifeval=input_data.jsonl --text base_text`` (docs/data-formats.md has the measured figures).

**Why one file of about 1,270 lines** (DESIGN.md: files over ~500 lines say why): the
instruction table (:data:`SPECS`: weights, kwargs ranges, companions), its conflict rules and
the witness that proves each drawn combination can be followed (:func:`satisfying_response`)
are one declaration: an instruction's entries in each of them must agree, and the tests check
the whole table at once.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.chat import last_user_text
from cascade_rl.data.job import Drop, Keep, Summary, run_job, state_path
from cascade_rl.data.rows import DataError, Row, RowError, check_input, pluck, prompt_messages
from cascade_rl.rewards.ifeval import IFEVAL_IDS, IFTRAIN_IDS, build_description, score
from cascade_rl.rewards.ifeval.ifeval_checks import has_word
from cascade_rl.rewards.ifeval.text import STOP_WORDS
from cascade_rl.world.instructions import KEYWORDS as TOY_KEYWORDS
from cascade_rl.world.instructions import POSTSCRIPT_MARKERS

FAMILIES: dict[str, tuple[str, ...]] = {"ifeval": IFEVAL_IDS, "iftrain": IFTRAIN_IDS}

# ------------------------------------------------------------------------------ instruction ids
EXISTENCE = "keywords:existence"
FREQUENCY = "keywords:frequency"
FORBIDDEN = "keywords:forbidden_words"
LETTER_FREQUENCY = "keywords:letter_frequency"
LANGUAGE = "language:response_language"
SENTENCES = "length_constraints:number_sentences"
PARAGRAPHS = "length_constraints:number_paragraphs"
WORD_COUNT = "length_constraints:number_words"
NTH_PARAGRAPH = "length_constraints:nth_paragraph_first_word"
PLACEHOLDERS = "detectable_content:number_placeholders"
POSTSCRIPT = "detectable_content:postscript"
BULLETS = "detectable_format:number_bullet_lists"
CONSTRAINED = "detectable_format:constrained_response"
HIGHLIGHTS = "detectable_format:number_highlighted_sections"
SECTIONS = "detectable_format:multiple_sections"
JSON = "detectable_format:json_format"
TITLE = "detectable_format:title"
TWO_RESPONSES = "combination:two_responses"
REPEAT_PROMPT = "combination:repeat_prompt"
END_PHRASE = "startend:end_checker"
CAPITAL_WORDS = "change_case:capital_word_frequency"
CAPITALS = "change_case:english_capital"
LOWERCASE = "change_case:english_lowercase"
NO_COMMA = "punctuation:no_comma"
QUOTATION = "startend:quotation"

REPEAT_PHRASE = "copy:repeat_phrase"
COPY = "copy:copy"
COPY_SIMPLE = "copy:copying_simple"
COPY_MULTIPLE = "copy:copying_multiple"
COPY_SPAN = "new:copy_span_idx"
HYPHENS = "detectable_format:sentence_hyphens"
BRACKETS = "detectable_format:square_brackets"
BIGRAMS = "detectable_format:bigram_wrapping"
NO_CONSECUTIVE = "keywords:no_adjacent_consecutive"
WORD_ONCE = "keywords:word_once"
WORD_NUMBER = "keywords:word_count_different_numbers"
EXCLUDE = "keywords:exclude_word_harder"
PALINDROME = "keywords:palindrome"
POSITION = "keywords:keyword_specific_position"
START_END = "keywords:start_end"
STAR_PARAGRAPHS = "paragraphs:paragraphs"
BLANK_PARAGRAPHS = "paragraphs:paragraphs2"
FIRST_WORD_SENTENCES = "first_word:first_word_sent"
FIRST_WORD = "first_word:first_word_answer"
LAST_WORD_SENTENCES = "last_word:last_word_sent"
LAST_WORD = "last_word:last_word_answer"
NO_DOT = "punctuation:punctuation_dot"
NO_EXCLAMATION = "punctuation:punctuation_exclamation"
LOWERCASE_COUNT = "count:lowercase_counting"
COMPOSITION = "count:counting_composition"
UNIQUE = "count:count_unique"
INCREMENT = "count:count_increment_word"
LETTER_COUNT = "letters:letter_counting"
LETTER_FREQUENCY_2 = "letters:letter_counting2"

#: the request-copying instructions: their ``prompt_to_repeat`` is set in the row's kwargs
REPEATS = (REPEAT_PROMPT, COPY, COPY_SIMPLE, COPY_MULTIPLE, COPY_SPAN)

# ------------------------------------------------------------------------------ word lists
#: Keywords when the base text has too few content words (our own list; the toy world's too).
WORDS = tuple(
    sorted(
        {
            *TOY_KEYWORDS,
            *"""answer reason number garden window market river bridge planet letter picture
            kitchen teacher student school season winter summer autumn spring forest mountain
            island ocean village city station ticket journey travel weather cloud thunder
            coffee bread apple orange lemon butter pencil paper notebook library museum
            doctor nurse farmer artist singer dancer painter engineer captain pilot animal
            rabbit turtle eagle dolphin tiger horse puppy kitten flower meadow valley desert
            candle lantern mirror blanket pillow basket bottle bucket hammer ladder rocket
            engine wheel signal button screen camera puzzle riddle secret treasure promise
            victory courage kindness honesty energy moment minute evening holiday festival
            quick quiet quest quote quality question unique jacket jungle joke judge major
            project zebra zero zone prize lazy frozen dozen extra example next mixture
            oxygen galaxy""".split(),
        }
    )
)
#: Words too common in questions to make good keywords.
GENERIC = frozenset(
    """much many more most each every also than then that this what which when where there
    their they them have has had will would could should does done make made take took give
    gave find found need needs want wants write function given return returns using used
    total times time altogether left remaining number numbers""".split()
)
#: Our own end phrases (not IFEval's: its test prompts use their own).
END_PHRASES = (
    "Hope this helps.",
    "That is my final answer.",
    "Thank you for the question.",
    "Feel free to ask for more details.",
    "Those are all the steps.",
    "Does that answer your question?",
    "Good luck with the rest of the work.",
    "And that is how it works.",
    "Tell me what you think.",
    "That settles it.",
    "Over to you now.",
    "Enjoy the rest of your day.",
    "This concludes my answer.",
    "Happy to help again anytime.",
    "Now you know the answer.",
)
SECTION_SPLITTERS = ("Section", "SECTION", "Part", "PART", "Step")
LANGUAGES = ("es", "fr", "de", "it", "pt")
#: phrases for copy:repeat_phrase when the base text has no run of plain words
PHRASES = (
    "a small step toward the goal",
    "the answer comes from careful work",
    "every question hides a simple idea",
    "we check each part of the plan",
)
FILLER = (
    "We start by reading the question with care.",
    "The key facts are listed in the text.",
    "Each step builds on the one before it.",
    "We write down what we know first.",
    "Then we work out what is still missing.",
    "A small table can help to keep track.",
    "We check the result against the facts.",
    "Simple steps make the work easy to follow.",
    "Every number in the text has a role.",
    "We keep the units the same throughout.",
    "The plan is short and clear.",
    "Good answers explain their reasoning.",
    "We avoid guessing and work it out.",
    "This approach works for similar tasks too.",
    "Careful work saves time later.",
    "We can test the idea on a small case.",
    "The final step puts everything together.",
    "Reading the task twice helps.",
    "Clear notes make mistakes easy to spot.",
    "We look for the simplest path to the result.",
    "Small examples show how the method works.",
    "The method stays the same for larger inputs.",
    "We name each value before we use it.",
    "Then we combine the values in order.",
    "Nothing in the text is left out.",
    "The result should make sense in context.",
    "We double check the last step.",
    "This keeps the whole answer tidy.",
    "A quick review finds small slips.",
    "The answer follows from these steps.",
    "Our notes stay short and plain.",
    "Patience pays off on problems like this.",
)
#: our own sentences in the languages ``language:response_language`` is drawn from
LANGUAGE_FILLER = {
    "es": (
        "Primero leemos el problema con mucha atención.",
        "Después anotamos los datos más importantes.",
        "Cada paso depende del paso anterior.",
        "Al final revisamos el resultado con calma.",
        "Este método sirve para muchos problemas parecidos.",
        "Una tabla pequeña ayuda a ordenar las ideas.",
        "La respuesta debe tener sentido en su contexto.",
        "Así terminamos el trabajo sin prisa.",
    ),
    "fr": (
        "Nous lisons le problème avec beaucoup d'attention.",
        "Ensuite nous notons les données les plus importantes.",
        "Chaque étape dépend de la précédente.",
        "À la fin nous vérifions le résultat avec soin.",
        "Cette méthode fonctionne pour beaucoup de problèmes semblables.",
        "Un petit tableau aide à garder les idées en ordre.",
        "La réponse doit avoir du sens dans son contexte.",
        "Ainsi nous terminons le travail sans nous presser.",
    ),
    "de": (
        "Zuerst lesen wir die Aufgabe sehr genau.",
        "Danach schreiben wir die wichtigsten Angaben auf.",
        "Jeder Schritt baut auf dem vorherigen auf.",
        "Am Ende prüfen wir das Ergebnis in Ruhe.",
        "Diese Methode passt zu vielen ähnlichen Aufgaben.",
        "Eine kleine Tabelle hilft beim Ordnen der Gedanken.",
        "Die Antwort muss im Zusammenhang einen Sinn ergeben.",
        "So beenden wir die Arbeit ohne Eile.",
    ),
    "it": (
        "Prima leggiamo il problema con molta attenzione.",
        "Poi scriviamo i dati più importanti.",
        "Ogni passo dipende da quello precedente.",
        "Alla fine controlliamo il risultato con calma.",
        "Questo metodo funziona per molti problemi simili.",
        "Una piccola tabella aiuta a ordinare le idee.",
        "La risposta deve avere senso nel suo contesto.",
        "Così finiamo il lavoro senza fretta.",
    ),
    "pt": (
        "Primeiro lemos o problema com muita atenção.",
        "Depois anotamos os dados mais importantes.",
        "Cada passo depende do passo anterior.",
        "No final verificamos o resultado com calma.",
        "Este método serve para muitos problemas parecidos.",
        "Uma pequena tabela ajuda a organizar as ideias.",
        "A resposta deve fazer sentido no seu contexto.",
        "Assim terminamos o trabalho sem pressa.",
    ),
}
LANGUAGE_TITLES = {"es": "Respuesta", "fr": "Réponse", "de": "Antwort", "it": "Risposta", "pt": "Resposta"}
TITLES = ("Clear Answer", "Worked Solution", "Short Reply", "Plain Notes")
CARRIERS = ("Keep {w} in mind.", "Think about {w} here.", "The word {w} matters.", "Note {w} as well.")
PALINDROMES = ("level", "noon", "kayak", "radar", "civic", "refer")
PLACEHOLDER_NAMES = ("name", "date", "place", "amount", "time", "city", "item", "note")
CAPS = ("NOTE", "KEY", "STEP", "CHECK", "DONE", "CLEAR", "TRUE", "GOOD", "FIRST", "LAST", "PLAN", "FACT")
COMMON_LETTERS = "etaoinshrdlcu"
LESS_COMMON_LETTERS = "kvwbpgfym"
RARE_LETTERS = "qjzx"


# ------------------------------------------------------------------------------ kwargs drawing
@dataclass
class Context:
    """What a row's kwargs are drawn from: the base text's content words, and the words and
    phrases this row's kwargs already use (required or forbidden), which later draws avoid."""

    base: str
    words: list[str]
    claimed: list[str] = field(default_factory=list)

    def fresh(self, word: str) -> bool:
        word = word.lower()
        return not any(word in other or other in word for other in (c.lower() for c in self.claimed))

    def claim(self, *texts: str) -> None:
        self.claimed.extend(texts)

    def keyword(self, rng: random.Random, from_text: float = 0.7) -> str:
        """A fresh keyword: one of the base text's content words (with probability
        ``from_text``) or one of :data:`WORDS`."""
        own = [w for w in self.words if self.fresh(w)]
        pool = own if own and rng.random() < from_text else [w for w in WORDS if self.fresh(w)]
        word = rng.choice(pool)
        self.claim(word)
        return word

    def letter(self, rng: random.Random, letters: str) -> str | None:
        """A letter absent from every claimed word (for "less than" letter counts)."""
        text = " ".join(self.claimed).lower()
        free = [letter for letter in letters if letter not in text]
        return rng.choice(free) if free else None


def content_words(text: str) -> list[str]:
    """The base text's content words: lower-cased letters-only words of 4-12 letters, no stop
    words or generic question words, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in re.findall(r"[A-Za-z]+", text):
        lower = word.lower()
        if 4 <= len(lower) <= 12 and lower not in STOP_WORDS and lower not in GENERIC:
            seen.setdefault(lower, None)
    return list(seen)


def _relation(rng: random.Random, at_least: float) -> str:
    return "at least" if rng.random() < at_least else "less than"


def _round_or_odd(rng: random.Random, values: Sequence[int]) -> int:
    """One of ``values``; one time in five one more (IFEval has 101, 151, 801...)."""
    value = rng.choice(values)
    return value + 1 if rng.random() < 0.2 else value


def _letter_kwargs(rng: random.Random, ctx: Context) -> dict[str, Any]:
    if rng.random() < 0.3:
        letter = ctx.letter(rng, RARE_LETTERS)
        if letter is not None:
            return {"letter": letter, "let_frequency": rng.randint(2, 4), "let_relation": "less than"}
    if rng.random() < 0.75:
        return {"letter": rng.choice(COMMON_LETTERS), "let_frequency": rng.randint(4, 15), "let_relation": "at least"}
    return {"letter": rng.choice(LESS_COMMON_LETTERS), "let_frequency": rng.randint(1, 4), "let_relation": "at least"}


def _count_keyword(rng: random.Random, ctx: Context) -> dict[str, Any]:
    relation = _relation(rng, 0.7)
    frequency = rng.randint(2, 4)
    return {"keyword": ctx.keyword(rng), "frequency": frequency, "relation": relation}


def _phrase(rng: random.Random, ctx: Context) -> dict[str, Any]:
    """copy:repeat_phrase: a run of 5-7 distinct plain words from the base text."""
    tokens = ctx.base.split()
    runs = []
    for size in (5, 6, 7):
        for start in range(len(tokens) - size + 1):
            window = tokens[start : start + size]
            if all(t.isalpha() and t.islower() for t in window) and len(set(window)) == size:
                runs.append(" ".join(window))
    phrase = rng.choice(runs) if runs else rng.choice(PHRASES)
    ctx.claim(*phrase.split())
    return {"phrase": phrase, "small_n": rng.randint(2, 4)}


def _span(rng: random.Random, ctx: Context) -> dict[str, Any]:
    """new:copy_span_idx: a span of whole words, 20-80 characters, of the base text."""
    starts = [0] + [m.end() for m in re.finditer(r"\s+", ctx.base)]
    ends = [m.start() - 1 for m in re.finditer(r"\s+", ctx.base)] + [len(ctx.base) - 1]
    pairs = [(s, e) for s in starts for e in ends if 20 <= e - s + 1 <= 80]
    if not pairs:
        return {"n_start": 0, "n_end": len(ctx.base) - 1}
    start, end = rng.choice(pairs)
    return {"n_start": start, "n_end": end}


def _sections(rng: random.Random, ctx: Context) -> dict[str, Any]:
    splitter = rng.choice(SECTION_SPLITTERS)
    ctx.claim(splitter)
    return {"section_spliter": splitter, "num_sections": rng.randint(2, 4)}


def _end_phrase(rng: random.Random, ctx: Context) -> dict[str, Any]:
    phrase = rng.choice(END_PHRASES)
    ctx.claim(*re.findall(r"[A-Za-z]+", phrase))
    return {"end_phrase": phrase}


def _nth_paragraph(rng: random.Random, ctx: Context) -> dict[str, Any]:
    paragraphs = rng.randint(2, 4)
    return {"num_paragraphs": paragraphs, "nth_paragraph": rng.randint(1, paragraphs), "first_word": ctx.keyword(rng)}


def _postscript(rng: random.Random, ctx: Context) -> dict[str, Any]:
    marker = rng.choice(POSTSCRIPT_MARKERS)
    ctx.claim(marker)
    return {"postscript_marker": marker}


def _no_kwargs(rng: random.Random, ctx: Context) -> dict[str, Any]:
    return {}


Draw = Callable[[random.Random, Context], dict[str, Any]]


@dataclass(frozen=True)
class Spec:
    """How an instruction is drawn: kwargs sampler, weight, the only instructions it may be
    combined with (``None``: any compatible one; empty: none), and the phase of its kwargs
    draw (0: words the answer must contain; 1: words and letters it must avoid, drawn after)."""

    draw: Draw
    weight: float = 1.0
    only_with: frozenset[str] | None = None
    phase: int = 0


ALONE: frozenset[str] = frozenset()
WORD_LEVEL = frozenset({EXISTENCE, FORBIDDEN, EXCLUDE, NO_COMMA})

SPECS: dict[str, Spec] = {
    # --- IFEval (weights roughly follow the instruction's share of IFEval's test prompts)
    EXISTENCE: Spec(lambda r, c: {"keywords": [c.keyword(r) for _ in range(r.choice((1, 1, 2, 2, 3)))]}, 1.0),
    FREQUENCY: Spec(_count_keyword, 0.9),
    FORBIDDEN: Spec(
        lambda r, c: {"forbidden_words": [c.keyword(r, 0.5) for _ in range(r.randint(1, 3))]}, 1.0, phase=1
    ),
    LETTER_FREQUENCY: Spec(_letter_kwargs, 0.7, phase=1),
    LANGUAGE: Spec(lambda r, c: {"language": r.choice(LANGUAGES)}, 0.4),
    SENTENCES: Spec(
        lambda r, c: (
            {"relation": "less than", "num_sentences": r.randint(3, 10)}
            if r.random() < 0.5
            else {"relation": "at least", "num_sentences": r.randint(2, 8)}
        ),
        1.0,
    ),
    PARAGRAPHS: Spec(lambda r, c: {"num_paragraphs": r.randint(2, 5)}, 0.6),
    WORD_COUNT: Spec(
        lambda r, c: (
            {"relation": "less than", "num_words": _round_or_odd(r, (30, 40, 50, 60, 80, 100, 120, 150, 200))}
            if r.random() < 0.4
            else {"relation": "at least", "num_words": _round_or_odd(r, (30, 50, 80, 100, 120, 150, 200, 250))}
        ),
        1.0,
    ),
    NTH_PARAGRAPH: Spec(_nth_paragraph, 0.4),
    PLACEHOLDERS: Spec(lambda r, c: {"num_placeholders": r.randint(1, 4)}, 0.6),
    POSTSCRIPT: Spec(_postscript, 0.6),
    BULLETS: Spec(lambda r, c: {"num_bullets": r.randint(2, 5)}, 0.7),
    CONSTRAINED: Spec(_no_kwargs, 0.25, only_with=ALONE),
    HIGHLIGHTS: Spec(lambda r, c: {"num_highlights": r.randint(1, 4)}, 0.9),
    SECTIONS: Spec(_sections, 0.4),
    JSON: Spec(_no_kwargs, 0.4, only_with=WORD_LEVEL | {LOWERCASE, NO_EXCLAMATION}),
    TITLE: Spec(_no_kwargs, 0.8),
    TWO_RESPONSES: Spec(_no_kwargs, 0.5, only_with=WORD_LEVEL | {TITLE, LOWERCASE, CAPITALS, NO_EXCLAMATION, LANGUAGE}),
    REPEAT_PROMPT: Spec(
        _no_kwargs,
        0.7,
        only_with=frozenset(
            {EXISTENCE, TITLE, NO_COMMA, END_PHRASE, POSTSCRIPT, HIGHLIGHTS, PLACEHOLDERS, LOWERCASE, CAPITALS}
        ),
    ),
    END_PHRASE: Spec(_end_phrase, 0.6),
    CAPITAL_WORDS: Spec(
        lambda r, c: (
            {"capital_relation": "at least", "capital_frequency": r.randint(2, 6)}
            if r.random() < 0.7
            else {"capital_relation": "less than", "capital_frequency": r.randint(3, 8)}
        ),
        0.6,
    ),
    CAPITALS: Spec(_no_kwargs, 0.6),
    LOWERCASE: Spec(_no_kwargs, 0.9),
    NO_COMMA: Spec(_no_kwargs, 1.2),
    QUOTATION: Spec(_no_kwargs, 0.8),
    # --- IFBench training constraints
    REPEAT_PHRASE: Spec(_phrase, 0.5, only_with=ALONE),
    COPY: Spec(_no_kwargs, 0.4, only_with=ALONE),
    COPY_SIMPLE: Spec(_no_kwargs, 0.4, only_with=ALONE),
    COPY_MULTIPLE: Spec(lambda r, c: {"N": r.randint(2, 3)}, 0.4, only_with=ALONE),
    COPY_SPAN: Spec(_span, 0.3, only_with=ALONE),
    HYPHENS: Spec(_no_kwargs, 0.5, only_with=ALONE),
    BRACKETS: Spec(_no_kwargs, 0.5, only_with=ALONE),
    BIGRAMS: Spec(_no_kwargs, 0.4, only_with=ALONE),
    NO_CONSECUTIVE: Spec(_no_kwargs, 0.4, only_with=ALONE),
    WORD_ONCE: Spec(lambda r, c: {"keyword": c.keyword(r)}, 1.0),
    WORD_NUMBER: Spec(_count_keyword, 1.0),
    EXCLUDE: Spec(lambda r, c: {"keyword": c.keyword(r, 0.8)}, 1.0, phase=1),
    PALINDROME: Spec(_no_kwargs, 0.8),
    POSITION: Spec(
        lambda r, c: {"keyword": c.keyword(r), "n": r.randint(1, 3), "m": r.randint(1, 6)}, 0.5, only_with=ALONE
    ),
    START_END: Spec(_no_kwargs, 0.5, only_with=ALONE),
    STAR_PARAGRAPHS: Spec(_no_kwargs, 0.8),
    BLANK_PARAGRAPHS: Spec(_no_kwargs, 0.8),
    FIRST_WORD_SENTENCES: Spec(lambda r, c: {"first_word": c.keyword(r)}, 0.4, only_with=ALONE),
    FIRST_WORD: Spec(lambda r, c: {"first_word": c.keyword(r)}, 1.0),
    LAST_WORD_SENTENCES: Spec(lambda r, c: {"last_word": c.keyword(r)}, 0.4, only_with=ALONE),
    LAST_WORD: Spec(lambda r, c: {"last_word": c.keyword(r)}, 1.0),
    NO_DOT: Spec(_no_kwargs, 0.8),
    NO_EXCLAMATION: Spec(_no_kwargs, 0.6),
    LOWERCASE_COUNT: Spec(lambda r, c: {"N": r.choice((3, 5, 8, 10, 15, 20))}, 0.5),
    COMPOSITION: Spec(lambda r, c: {"n_sent": r.randint(1, 3), "n_words": r.randint(3, 6)}, 0.3, only_with=ALONE),
    UNIQUE: Spec(_no_kwargs, 0.5, only_with=ALONE),
    INCREMENT: Spec(lambda r, c: {"keyword1": c.keyword(r), "keyword2": c.keyword(r)}, 0.8),
    LETTER_COUNT: Spec(
        lambda r, c: (
            {"relation": "less than", "N": r.choice(range(200, 801, 50))}
            if r.random() < 0.5
            else {"relation": "at least", "N": r.choice(range(100, 601, 50))}
        ),
        0.6,
    ),
    LETTER_FREQUENCY_2: Spec(_letter_kwargs, 0.6, phase=1),
}

#: at most one instruction of each group: they claim the same property of the answer
CONFLICT_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({LOWERCASE, CAPITALS, CAPITAL_WORDS, LOWERCASE_COUNT, LANGUAGE}),  # case / language
    frozenset({PARAGRAPHS, NTH_PARAGRAPH, STAR_PARAGRAPHS, BLANK_PARAGRAPHS, TWO_RESPONSES, SECTIONS}),  # layout
    frozenset({WORD_COUNT, LETTER_COUNT}),  # length
    frozenset({LETTER_FREQUENCY, LETTER_FREQUENCY_2}),  # one letter's count
    frozenset({END_PHRASE, LAST_WORD}),  # the last words
)
#: words an answer in another language cannot contain
ENGLISH_WORDS = (
    EXISTENCE,
    FREQUENCY,
    FORBIDDEN,
    WORD_ONCE,
    WORD_NUMBER,
    EXCLUDE,
    INCREMENT,
    END_PHRASE,
    FIRST_WORD,
    LAST_WORD,
    NTH_PARAGRAPH,
    SECTIONS,
    PALINDROME,
)
CONFLICT_PAIRS: frozenset[frozenset[str]] = frozenset(
    {frozenset({LANGUAGE, other}) for other in ENGLISH_WORDS}
    | {
        frozenset({FIRST_WORD, TITLE}),  # the first words: a title, a header or the word asked for
        frozenset({FIRST_WORD, SECTIONS}),
        frozenset({FIRST_WORD, NTH_PARAGRAPH}),
        frozenset({LOWERCASE, SECTIONS}),  # "Section 1" headers are matched case-sensitively
        frozenset({NO_DOT, POSTSCRIPT}),  # "P.S." / "P.P.S" are written with dots
        frozenset({NO_DOT, SENTENCES}),  # sentences end with dots
    }
)


def compatible(first: str, second: str) -> bool:
    """Whether two instructions may be drawn for one row (module docstring, **Conflicts**)."""
    if first == second:
        return False
    for one, other in ((first, second), (second, first)):
        only = SPECS[one].only_with
        if only is not None and other not in only:
            return False
    if any(first in group and second in group for group in CONFLICT_GROUPS):
        return False
    return frozenset({first, second}) not in CONFLICT_PAIRS


def instruction_pool(families: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """The ids of ``families`` (:data:`FAMILIES`) without ``exclude`` (ids, or ``family:``
    prefixes such as ``copy:``)."""
    excluded = [e.strip() for e in exclude if e.strip()]
    pool: list[str] = []
    for family in families:
        if family not in FAMILIES:
            raise DataError(f"unknown constraint family {family!r}; known: {', '.join(FAMILIES)}")
        pool += [i for i in FAMILIES[family] if i not in pool]
    known = set(SPECS)
    for entry in excluded:
        if not entry.endswith(":") and entry not in known:
            raise DataError(f"--exclude-ids: unknown instruction id {entry!r}")
    pool = [i for i in pool if not any(i == e or (e.endswith(":") and i.startswith(e)) for e in excluded)]
    if not pool:
        raise DataError("no instruction left to draw (check --families and --exclude-ids)")
    return pool


def draw_count(rng: random.Random, low: int, high: int) -> int:
    """Constraints per row: ``low..high``, each count half as likely as the one before."""
    counts = list(range(low, high + 1))
    return rng.choices(counts, weights=[2.0 ** -(c - low) for c in counts])[0]


def draw_ids(rng: random.Random, count: int, pool: Sequence[str]) -> list[str]:
    """``count`` pairwise-compatible instructions drawn by weight (fewer if none is left)."""
    chosen: list[str] = []
    while len(chosen) < count:
        candidates = [i for i in pool if all(compatible(i, c) for c in chosen)]
        if count > 1:  # an instruction that combines with nothing makes one-constraint rows only
            candidates = [i for i in candidates if SPECS[i].only_with != ALONE]
        if not candidates:
            break
        chosen.append(rng.choices(candidates, weights=[SPECS[i].weight for i in candidates])[0])
    return chosen


# ------------------------------------------------------------------------------ rows
@dataclass
class Drawn:
    """One drawn row: instructions, kwargs and the user prompt."""

    ids: list[str]
    kwargs: list[dict[str, Any]]
    prompt: str


def render(base: str, ids: Sequence[str], kwargs: Sequence[dict[str, Any]], separator: str) -> Drawn:
    """The prompt: the base text, then the descriptions (a request to repeat comes last and
    gets ``prompt_to_repeat``: everything before it, IFEval's convention)."""
    kwargs = [dict(k) for k in kwargs]
    order = sorted(range(len(ids)), key=lambda i: ids[i] in REPEATS)
    ids = [ids[i] for i in order]
    kwargs = [kwargs[i] for i in order]
    head = base.strip()
    descriptions = [build_description(i, k) for i, k in zip(ids, kwargs) if i not in REPEATS]
    if descriptions:
        head += separator + " ".join(descriptions)
    prompt = head
    for index, instruction in enumerate(ids):
        if instruction in REPEATS:
            kwargs[index]["prompt_to_repeat"] = head if instruction == REPEAT_PROMPT else base.strip()
            prompt = (
                head
                + (" " if instruction == REPEAT_PROMPT else separator)
                + build_description(instruction, kwargs[index])
            )
    return Drawn(ids, kwargs, prompt)


def draw_row(
    base: str, rng: random.Random, pool: Sequence[str], counts: tuple[int, int], rejected: Counter | None = None
) -> Drawn | None:
    """Instructions and kwargs for ``base`` that have a witness (module docstring), or None
    after 40 tries. ``rejected`` counts the instructions of each combination drawn again."""
    words = content_words(base)
    for _ in range(10):
        ids = draw_ids(rng, draw_count(rng, *counts), pool)
        if not ids:
            return None
        for _ in range(4):
            ctx = Context(base, words)
            kwargs: dict[str, dict[str, Any]] = {}
            for instruction in sorted(ids, key=lambda i: SPECS[i].phase):
                kwargs[instruction] = SPECS[instruction].draw(rng, ctx)
            drawn = render(base, ids, [kwargs[i] for i in ids], rng.choice((" ", "\n\n")))
            if satisfying_response(drawn.ids, drawn.kwargs) is not None:
                return drawn
            if rejected is not None:
                rejected.update(ids)
    return None


# ------------------------------------------------------------------------------ the witness
def follows(text: str, ids: Sequence[str], kwargs: Sequence[Mapping[str, Any]]) -> bool:
    """The registry's strict verdict on ``text`` (the IF-RL reward is 1.0)."""
    return score(text, instruction_id_list=list(ids), kwargs=list(kwargs)).reward == 1.0


FILL_STEPS = (1, 2, 3, 4, 6, 9, 13, 18, 25, 34)


def satisfying_response(ids: Sequence[str], kwargs: Sequence[Mapping[str, Any]]) -> str | None:
    """An answer that follows every instruction (checked with the scorer), or None when this
    constructor finds none: more or fewer filler sentences, short or long ones, are tried."""
    given = {i: dict(k) for i, k in zip(ids, kwargs)}
    for fill in FILL_STEPS:
        for long in (False, True):
            text = _Witness(given, fill, long).build()
            if text is not None and follows(text, ids, kwargs):
                return text
    return None


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Witness:
    """One attempt at an answer: ``fill`` filler sentences (joined in threes when ``long``),
    the words, lines and layout the instructions ask for, then character-level changes."""

    def __init__(self, given: dict[str, dict[str, Any]], fill: int, long: bool) -> None:
        self.given = given
        self.fill = fill
        self.long = long
        self.language = given.get(LANGUAGE, {}).get("language")
        self.bank = self._bank()

    # --- what sentences may contain
    def banned_words(self) -> list[str]:
        words = list(self.given.get(FORBIDDEN, {}).get("forbidden_words", []))
        if EXCLUDE in self.given:
            words.append(self.given[EXCLUDE]["keyword"])
        return words

    def limited(self) -> list[str]:
        """Substrings that must not occur outside the sentences written for them."""
        words = []
        for instruction in (FREQUENCY, WORD_NUMBER, WORD_ONCE):
            if instruction in self.given:
                words.append(self.given[instruction]["keyword"])
        if INCREMENT in self.given:
            words += [self.given[INCREMENT]["keyword1"], self.given[INCREMENT]["keyword2"]]
        return words

    def limited_letters(self) -> str:
        letters = ""
        for instruction in (LETTER_FREQUENCY, LETTER_FREQUENCY_2):
            arguments = self.given.get(instruction)
            if arguments and arguments["let_relation"] == "less than":
                letters += arguments["letter"].lower()
        return letters

    def ok(self, sentence: str) -> bool:
        lower = sentence.lower()
        if any(has_word(word, sentence) for word in self.banned_words()):
            return False
        if any(word.lower() in lower for word in self.limited()):
            return False
        if any(letter in lower for letter in self.limited_letters()):
            return False
        return not (NO_EXCLAMATION in self.given and "!" in sentence)

    def _bank(self) -> list[str]:
        source = LANGUAGE_FILLER[self.language] if self.language else FILLER
        return [s for s in source if self.ok(s)]

    def sentences(self, count: int, offset: int = 0) -> list[str]:
        if not self.bank:
            return []
        out = [self.bank[(offset + i) % len(self.bank)] for i in range(count)]
        if self.long:
            groups = [out[i : i + 3] for i in range(0, len(out), 3)]
            out = [" and ".join([g[0][:-1], *(_lower_first(s[:-1]) for s in g[1:])]) + "." for g in groups]
        return out

    def first_ok(self, options: Iterable[str]) -> str | None:
        return next((option for option in options if self.ok(option)), None)

    def carrier(self, word: str, index: int = 0) -> str | None:
        """A sentence holding ``word`` once, the rest of it allowed."""
        for shift in range(len(CARRIERS)):
            template = CARRIERS[(index + shift) % len(CARRIERS)]
            if self.ok(template.replace("{w}", "")):
                return template.format(w=word)
        return None

    # --- the pieces
    def inserts(self) -> list[str] | None:
        """Sentences the answer must contain: keywords, placeholders, palindrome, highlights,
        all-caps words."""
        given, out = self.given, []
        words: list[tuple[str, int]] = []
        if EXISTENCE in given:
            words += [(w, 1) for w in given[EXISTENCE]["keywords"]]
        for instruction in (FREQUENCY, WORD_NUMBER):
            if instruction in given:
                arguments = given[instruction]
                at_least = arguments["relation"] == "at least"
                times = arguments["frequency"] if at_least else min(1, arguments["frequency"] - 1)
                words.append((arguments["keyword"], times))
        if WORD_ONCE in given:
            words.append((given[WORD_ONCE]["keyword"], 1))
        if INCREMENT in given:
            words += [(given[INCREMENT]["keyword1"], 1), (given[INCREMENT]["keyword2"], 2)]
        for word, times in words:
            for index in range(times):
                sentence = self.carrier(word, index)
                if sentence is None:
                    return None
                out.append(sentence)
        if PLACEHOLDERS in given:
            count = given[PLACEHOLDERS]["num_placeholders"]
            names = [PLACEHOLDER_NAMES[i % len(PLACEHOLDER_NAMES)] for i in range(count)]
            out.append("Fill in " + " and ".join(f"[{n}]" for n in names) + ".")
        if PALINDROME in given:
            word = self.first_ok(f"A {p} is easy to spot." for p in PALINDROMES)
            if word is None:
                return None
            out.append(word)
        if HIGHLIGHTS in given:
            pieces = self.sentences(given[HIGHLIGHTS]["num_highlights"], offset=5)
            out += [f"*{s[:-1]}*." for s in pieces]
        if CAPITAL_WORDS in given and given[CAPITAL_WORDS]["capital_relation"] == "at least":
            count = given[CAPITAL_WORDS]["capital_frequency"]
            out.append("Remember " + " ".join(CAPS[i % len(CAPS)] for i in range(count)) + ".")
        return out

    def letter_top_up(self, text: str) -> str | None:
        """A sentence of words with the letter when an "at least" letter count falls short."""
        for instruction in (LETTER_FREQUENCY, LETTER_FREQUENCY_2):
            arguments = self.given.get(instruction)
            if not arguments or arguments["let_relation"] != "at least":
                continue
            letter = arguments["letter"].lower()
            missing = arguments["let_frequency"] - text.lower().count(letter)
            if missing <= 0:
                continue
            words = [w for w in WORDS if letter in w and self.ok(w)]
            if not words:
                return None
            chosen: list[str] = []
            while missing > 0:
                word = words[len(chosen) % len(words)]
                chosen.append(word)
                missing -= word.count(letter)
            return "Words like " + " ".join(chosen) + " come up."
        return ""

    def title(self) -> str | None:
        if self.language:
            return f"<<{LANGUAGE_TITLES[self.language]}>>"
        found = self.first_ok(TITLES)
        return f"<<{found}>>" if found else None

    # --- the answer
    def build(self) -> str | None:
        given = self.given
        if len(given) == 1:
            special = self._alone(next(iter(given)))
            if special is not None or next(iter(given)) in _ALONE_BUILDERS:
                return special
        if not self.bank:
            return None
        inserts = self.inserts()
        if inserts is None:
            return None
        if JSON in given:
            body = " ".join([*self.sentences(self.fill), *inserts])
            return self.finish(json.dumps({"answer": body}, ensure_ascii=False))
        if TWO_RESPONSES in given:
            title = self.title() if TITLE in given else ""
            first = " ".join([*self.sentences(max(1, self.fill)), *inserts])
            second = " ".join([*self.sentences(max(1, self.fill), offset=11), *inserts])
            if title is None:
                return None
            return self.finish(f"{title}\n{first}\n******\n{title}\n{second}".replace("\n\n", "\n").strip())
        text = self.document(inserts)
        if text is None:
            return None
        top_up = self.letter_top_up(text)
        if top_up is None:
            return None
        if top_up:
            text = self.document([*inserts, top_up])
            if text is None:
                return None
        return self.finish(text)

    def layout(self) -> tuple[int, str]:
        """Paragraph count and separator."""
        given = self.given
        if PARAGRAPHS in given:
            return given[PARAGRAPHS]["num_paragraphs"], "\n***\n"
        if STAR_PARAGRAPHS in given:
            return 2, "\n***\n"
        if BLANK_PARAGRAPHS in given:
            return 2, "\n\n"
        if NTH_PARAGRAPH in given:
            return given[NTH_PARAGRAPH]["num_paragraphs"], "\n\n"
        if SECTIONS in given:
            return given[SECTIONS]["num_sections"], "\n\n"
        return 1, "\n\n"

    def document(self, inserts: list[str]) -> str | None:
        given = self.given
        count, separator = self.layout()
        filler = self.sentences(max(self.fill, count))
        if len(filler) < count:
            return None
        paragraphs: list[list[str]] = [[] for _ in range(count)]
        for index, sentence in enumerate(filler):
            paragraphs[index * count // len(filler)].append(sentence)
        first = paragraphs[0]
        first[1:1] = inserts  # after the opening sentence
        if NTH_PARAGRAPH in given:
            arguments = given[NTH_PARAGRAPH]
            target = paragraphs[arguments["nth_paragraph"] - 1]
            target[0] = f"{_upper_first(arguments['first_word'])} {_lower_first(target[0])}"
        if FIRST_WORD in given:
            first[0] = f"{_upper_first(given[FIRST_WORD]['first_word'])}: {_lower_first(first[0])}"
        texts = [" ".join(p) for p in paragraphs]
        if BULLETS in given:
            bullets = self.sentences(given[BULLETS]["num_bullets"], offset=17)
            if len(set(bullets)) < len(bullets):
                return None
            texts[0] += "\n" + "\n".join(f"* {b}" for b in bullets)
        if SECTIONS in given:
            splitter = given[SECTIONS]["section_spliter"]
            texts = [f"{splitter} {i + 1}\n{t}" for i, t in enumerate(texts)]
        if TITLE in given:
            title = self.title()
            if title is None:
                return None
            texts[0] = f"{title}\n{texts[0]}"
        text = separator.join(texts)
        tail = ""
        if POSTSCRIPT in given:
            closing = self.sentences(1, offset=26)
            line = f"{given[POSTSCRIPT]['postscript_marker']} {closing[0] if closing else ''}".strip()
            tail += ("\n" if separator == "\n\n" and count > 1 else "\n\n") + line
        if LAST_WORD in given:
            tail += f" That is all about {given[LAST_WORD]['last_word']}."
        if END_PHRASE in given:
            tail += " " + given[END_PHRASE]["end_phrase"]
        text += tail
        if REPEAT_PROMPT in given:
            text = given[REPEAT_PROMPT]["prompt_to_repeat"] + "\n\n" + text
        return text

    def finish(self, text: str) -> str:
        """Character-level instructions, last: quotes, commas, dots, exclamation marks, case."""
        given = self.given
        if QUOTATION in given:
            text = f'"{text}"'
        if NO_COMMA in given:
            text = text.replace(",", "")
        if NO_DOT in given:
            text = text.replace(".", "")
        if NO_EXCLAMATION in given:
            text = text.replace("!", "")
        if LOWERCASE in given:
            text = text.lower()
        if CAPITALS in given:
            text = text.upper()
        if LOWERCASE_COUNT in given:
            text = re.sub(r"\b[a-z]", lambda m: m.group().upper(), text)
        return text

    # --- instructions that shape the whole answer
    def _alone(self, instruction: str) -> str | None:
        builder = _ALONE_BUILDERS.get(instruction)
        return builder(self, self.given[instruction]) if builder else None

    def words(self, count: int, offset: int = 0) -> list[str]:
        stream = " ".join(self.sentences(count // 5 + 2, offset)).replace(".", "").split()
        return stream[:count]


def _constrained(w: _Witness, a: dict) -> str:
    return " ".join(w.sentences(w.fill)) + " My answer is yes."


def _repeat_phrase(w: _Witness, a: dict) -> str:
    words = a["phrase"].split()
    middle = len(words) // 2
    options = [x for x in ("small", "clear", "quiet", "bright", "steady") if x != words[middle]]
    return "\n".join(" ".join(words[:middle] + [options[i]] + words[middle + 1 :]) for i in range(a["small_n"]))


def _copy(w: _Witness, a: dict) -> str:
    return a["prompt_to_repeat"]


def _copy_multiple(w: _Witness, a: dict) -> str:
    return "\n******\n".join([a["prompt_to_repeat"]] * a["N"])


def _copy_span(w: _Witness, a: dict) -> str:
    return a["prompt_to_repeat"][a["n_start"] : a["n_end"] + 1]


def _hyphens(w: _Witness, a: dict) -> str:
    return "-".join(s for s in w.sentences(max(2, w.fill)) if "-" not in s)


def _brackets(w: _Witness, a: dict) -> str:
    return " ".join(f"[{word}]" for word in " ".join(w.sentences(w.fill)).split())


def _bigrams(w: _Witness, a: dict) -> str:
    words = " ".join(w.sentences(w.fill)).split()
    words = words[: len(words) // 2 * 2]
    return " ".join(f"<<{x} {y}>>" for x, y in zip(words[0::2], words[1::2]))


def _no_consecutive(w: _Witness, a: dict) -> str:
    kept: list[str] = []
    for word in " ".join(w.sentences(w.fill)).split():
        if kept and ord(word[0].lower()) - ord(kept[-1][0].lower()) == 1:
            continue
        kept.append(word)
    return " ".join(kept)


def _position(w: _Witness, a: dict) -> str:
    before = w.sentences(a["n"] - 1)
    words = w.words(a["m"] + 3, offset=9)
    words.insert(a["m"] - 1, a["keyword"])
    return " ".join([*before, _upper_first(" ".join(words)) + "."])


def _start_end(w: _Witness, a: dict) -> str:
    body = " ".join(w.sentences(w.fill)).rstrip(".")
    return f"Answer: {_lower_first(body)} and that is the answer"


def _first_word_sentences(w: _Witness, a: dict) -> str:
    word = _upper_first(a["first_word"])
    return " ".join(f"{word} {_lower_first(s)}" for s in w.sentences(max(1, w.fill)))


def _last_word_sentences(w: _Witness, a: dict) -> str:
    return " ".join(f"{s[:-1]} {a['last_word']}." for s in w.sentences(max(1, w.fill)))


def _composition(w: _Witness, a: dict) -> str:
    stream = w.words(3 * a["n_sent"] * a["n_words"] + 5)
    if len(stream) < 3 * a["n_sent"] * a["n_words"]:
        return ""
    sentences = [
        _upper_first(" ".join(stream[i * a["n_words"] : (i + 1) * a["n_words"]])) + "." for i in range(3 * a["n_sent"])
    ]
    paragraphs = [" ".join(sentences[p * a["n_sent"] : (p + 1) * a["n_sent"]]) for p in range(3)]
    return "\n***\n".join(paragraphs)


def _unique(w: _Witness, a: dict) -> str:
    seen: set[str] = set()
    kept = []
    for word in " ".join(w.sentences(max(2, w.fill))).replace(".", "").split():
        if word.lower() not in seen:
            seen.add(word.lower())
            kept.append(word)
    return " ".join(kept) + "."


_ALONE_BUILDERS: dict[str, Callable[[_Witness, dict], str]] = {
    CONSTRAINED: _constrained,
    REPEAT_PHRASE: _repeat_phrase,
    COPY: _copy,
    COPY_SIMPLE: _copy,
    COPY_MULTIPLE: _copy_multiple,
    COPY_SPAN: _copy_span,
    HYPHENS: _hyphens,
    BRACKETS: _brackets,
    BIGRAMS: _bigrams,
    NO_CONSECUTIVE: _no_consecutive,
    POSITION: _position,
    START_END: _start_end,
    FIRST_WORD_SENTENCES: _first_word_sentences,
    LAST_WORD_SENTENCES: _last_word_sentences,
    COMPOSITION: _composition,
    UNIQUE: _unique,
}


# ------------------------------------------------------------------------------ the command
def base_text(data: Mapping[str, Any], text_field: str | None = None) -> str:
    """The text constraints are added to: ``text_field`` (a string, or chat messages whose
    last user turn is taken), else the last user turn of the row's prompt / question
    (:func:`prompt_messages`), else its ``text`` (MBPP)."""
    if text_field is not None:
        value = pluck(data, text_field)
        if isinstance(value, list):
            value = last_user_text(prompt_messages({"prompt": value})) or None
        if not isinstance(value, str) or not value.strip():
            raise RowError(f"no text in field {text_field!r}")
        return value.strip()
    text = last_user_text(prompt_messages(data))
    if not text.strip() and isinstance(data.get("text"), str):
        text = data["text"]
    if not text.strip():
        raise RowError("no text found (prompt, question, text, ...); pass --text-field")
    return text.strip()


def parse_counts(text: str) -> tuple[int, int]:
    """``"2"`` or ``"1-3"`` -> (low, high)."""
    low, _, high = text.partition("-")
    try:
        counts = int(low), int(high or low)
    except ValueError:
        raise DataError(f"--constraints: expected N or LOW-HIGH, got {text!r}") from None
    if not 1 <= counts[0] <= counts[1] <= 6:
        raise DataError(f"--constraints: expected 1 <= LOW <= HIGH <= 6, got {text!r}")
    return counts


def parse_where(text: str | None) -> Callable[[Mapping[str, Any]], bool] | None:
    """``FIELD=LOW..HIGH`` (numbers, inclusive) or ``FIELD=VALUE``."""
    if text is None:
        return None
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise DataError(f"--where: expected FIELD=LOW..HIGH or FIELD=VALUE, got {text!r}")
    if ".." in value:
        low_text, _, high_text = value.partition("..")
        try:
            low, high = float(low_text), float(high_text)
        except ValueError:
            raise DataError(f"--where: {value!r} is not a range of numbers") from None

        def in_range(data: Mapping[str, Any]) -> bool:
            found = pluck(data, name)
            return isinstance(found, (int, float)) and not isinstance(found, bool) and low <= found <= high

        return in_range
    return lambda data: str(pluck(data, name)) == value


def _source(row: Row, data: Mapping[str, Any]) -> tuple[str, str]:
    """(file, the row's own id or its line number) of an input row."""
    path, _, line = row.where.rpartition(":")
    for key in ("id", "task_id", "key"):
        if isinstance(data.get(key), (str, int)) and not isinstance(data.get(key), bool):
            return path, str(data[key])
    return path, line.replace("row ", "")


def id_prefix(path: str) -> str:
    """``gsm8k/train.jsonl`` -> ``gsm8k-train``; ``mbpp/mbpp.jsonl`` -> ``mbpp``."""
    file = Path(path)
    parent, stem = file.parent.name, file.stem
    return stem if not parent or parent == stem else f"{parent}-{stem}"


def constrained_row(
    text: str, pool: Sequence[str], counts: tuple[int, int], *, seed: int, rejected: Counter | None = None
) -> dict | None:
    """The ``ifeval`` RL row for one base text (its constraints drawn from ``(seed, text)``
    alone), or None when no satisfiable combination was drawn."""
    drawn = draw_row(text, random.Random(f"{seed}:{text}"), pool, counts, rejected)
    if drawn is None:
        return None
    return {
        "prompt": [{"role": "user", "content": drawn.prompt}],
        "domain": "ifeval",
        "instruction_id_list": drawn.ids,
        "kwargs": drawn.kwargs,
        "base_text": text,
    }


def constrain(
    row: Mapping[str, Any],
    suffix: str = "",
    text_field: str | None = None,
    constraints: str = "1-3",
    families: str | Sequence[str] = "ifeval",
    exclude_ids: str | Sequence[str] = (),
    seed: int = 0,
    where: str | None = None,
) -> dict | Drop:
    """The converter view of ``cascade data constrain`` (``format: constrain`` on a recipe's data
    source): one row in, its IF-RL row out, the same row the command writes for it; ``where``
    (``FIELD=LOW..HIGH`` or ``FIELD=VALUE``) keeps only the rows it selects."""
    del suffix  # the constraints are the row's instruction
    select = parse_where(where)
    if select is not None and not select(row):
        return Drop(f"not selected by where {where}")
    pool = instruction_pool(_names(families), _names(exclude_ids))
    data = constrained_row(base_text(row, text_field), pool, parse_counts(constraints), seed=seed)
    if data is None:
        return Drop("no satisfiable combination drawn")
    source = next((row[k] for k in ("id", "task_id", "key") if isinstance(row.get(k), (str, int))), None)
    return {"id": f"{source}-if", **data} if source is not None else data


def _names(value: str | Sequence[str]) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` -> ``["a", "b"]``."""
    return [v for v in value.split(",") if v] if isinstance(value, str) else list(value)


def constrain_files(
    inputs: Sequence[Path],
    output: Path,
    *,
    text_field: str | None = None,
    constraints: str = "1-3",
    families: Sequence[str] = ("ifeval",),
    exclude_ids: Sequence[str] = (),
    seed: int = 0,
    limit: int | None = None,
    where: str | None = None,
    prefix: str | None = None,
    **job: Any,
) -> Summary:
    """Build one ``ifeval`` RL row per input text (module docstring); ids are
    ``PREFIX-SOURCE-if``, SOURCE the row's ``id`` / ``task_id`` / ``key`` or its line, PREFIX
    ``prefix`` or :func:`id_prefix` of its file. ``extra`` of the summary: rows per instruction
    (with redrawn combinations) and per constraint count."""
    for path in inputs:
        check_input(Path(path))
    counts = parse_counts(constraints)
    pool = instruction_pool(families, exclude_ids)
    select = parse_where(where)
    if limit is not None and limit < 1:
        raise DataError("--limit must be at least 1")
    per_id: Counter = Counter()
    per_count: Counter = Counter()
    rejected: Counter = _previous_rejections(output, job.get("overwrite", False))

    def count(data: dict) -> None:
        per_id.update(data["instruction_id_list"])
        per_count[len(data["instruction_id_list"])] += 1

    def process(rows: Sequence[Row]) -> list:
        outcomes: list = []
        for row in rows:
            if select is not None and not select(row.data):
                outcomes.append(Drop(f"not selected by --where {where}"))
                continue
            if limit is not None and sum(per_count.values()) >= limit:
                outcomes.append(Drop("beyond --limit"))
                continue
            try:
                text = base_text(row.data, text_field)
            except RowError as error:
                outcomes.append(error)
                continue
            path, source = _source(row, row.data)
            data = constrained_row(text, pool, counts, seed=seed, rejected=rejected)
            if data is None:
                outcomes.append(Drop("no satisfiable combination drawn"))
                continue
            data = {"id": f"{prefix or id_prefix(path)}-{source}-if", **data, "base_id": f"{Path(path).name}:{source}"}
            count(data)
            outcomes.append(Keep([data]))
        return outcomes

    def extra() -> dict:
        total = sum(per_count.values()) or 1
        family_of = {i: name for name, ids in FAMILIES.items() for i in ids}
        table = [
            {
                "instruction": instruction,
                "family": family_of[instruction],
                "rows": per_id[instruction],
                "% of rows": f"{100 * per_id[instruction] / total:.1f}",
                "redrawn": rejected[instruction],
            }
            for instruction in pool
        ]
        table.sort(key=lambda r: (-r["rows"], r["instruction"]))
        shares = [{"constraints": c, "rows": per_count[c]} for c in range(counts[0], counts[1] + 1)]
        return {"per instruction": table, "constraints per row": shares}

    options = {
        "text_field": text_field,
        "constraints": list(counts),
        "families": list(families),
        "exclude_ids": sorted(exclude_ids),
        "seed": seed,
        "limit": limit,
        "where": where,
        "prefix": prefix,
    }
    return run_job("constrain", inputs, output, process, options=options, warm=count, extra=extra, **job)


def _previous_rejections(output: Path, overwrite: bool) -> Counter:
    """The redraw counts of an interrupted run being resumed (its rows are counted again by
    ``warm``; redraws leave no trace in the rows)."""
    state = state_path(Path(output))
    if overwrite or not state.exists():
        return Counter()
    try:
        table = json.loads(state.read_text())["summary"]["extra"]["per instruction"]
        return Counter({r["instruction"]: int(r["redrawn"]) for r in table})
    except (ValueError, KeyError, TypeError):
        return Counter()
