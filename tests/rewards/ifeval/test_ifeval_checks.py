"""Every registered instruction follows a response that obeys it and rejects one that does not
(SPEC section 6, IF-RL); a hypothesis fuzz shows no checker raises or hangs on arbitrary text."""

from __future__ import annotations

import string
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.ifeval import INSTRUCTIONS, build_description, check, score
from cascade_rl.rewards.ifeval.ifeval_checks import LANGUAGE_NAMES
from cascade_rl.rewards.ifeval.spec import Param

AFRICA = [
    "Zimbabwe",
    "Zambia",
    "Uganda",
    "Tunisia",
    "Togo",
    "Tanzania",
    "Sudan",
    "South Sudan",
    "South Africa",
    "Somalia",
    "Sierra Leone",
    "Seychelles",
    "Senegal",
    "Sao Tome",
    "Rwanda",
    "Nigeria",
    "Niger",
    "Namibia",
    "Mozambique",
    "Morocco",
    "Mauritius",
    "Mauritania",
    "Mali",
    "Malawi",
    "Madagascar",
    "Libya",
    "Liberia",
    "Lesotho",
    "Kenya",
    "Guinea-Bissau",
    "Guinea",
    "Ghana",
    "Gambia",
    "Gabon",
    "Ethiopia",
    "Eswatini",
    "Eritrea",
    "Equatorial Guinea",
    "Egypt",
    "Djibouti",
    "Cote d'Ivoire",
    "Congo",
    "Comoros",
    "Chad",
    "Central African Republic",
    "Cameroon",
    "Cabo Verde",
    "Burundi",
    "Burkina Faso",
    "Botswana",
    "Benin",
    "Angola",
    "Algeria",
]
MCQ = "\n".join(
    f"Question {n}: {stem}\nA. one\nB. two\nC. three\nD. four\nE. five"
    for n, stem in enumerate(
        ["Who?", "Who painted it?", "Which movement was first?", "Which artist founded the Cubist movement in Paris?"],
        start=1,
    )
)
CAPITALS = (
    "Reykjavik, Helsinki, Oslo, Tallinn, Stockholm, Riga, Moscow, Copenhagen, Vilnius, "
    "Minsk, Dublin, Berlin, Amsterdam, Warsaw, London, Brussels, Prague, Luxembourg, "
    "Paris, Vienna, Bratislava, Budapest, Vaduz, Chisinau, Bern, Ljubljana, Zagreb"
)
STORY = " ".join(f"{letter.upper()}{letter * 2} went home." for letter in string.ascii_lowercase)
PRODUCTS = "ProductID,Category,Brand,Price,Stock\n" + "\n".join(
    f'{n},Tools,"Acme & Co",9.99,{n}' if n == 1 else f"{n},Tools,Acme,9.99,{n}" for n in range(1, 15)
)
STUDENTS = "\n".join(
    "\t".join(f'"{v}"' for v in row)
    for row in [
        ("StudentID", "Subject", "Grade", "Semester", "Score"),
        ("1", "Math", "A", "Fall", "90"),
        ("2", "Art", "B", "Fall", "80"),
        ("3", "Music", "C", "Spring", "70"),
    ]
)
REQUEST = "Write a short poem about the sea"

# (instruction id, kwargs, a response that follows it, a response that does not)
CASES: list[tuple[str, dict, str, str]] = [
    # --- IFEval ---
    ("keywords:existence", {"keywords": ["ocean", "Salt"]}, "The ocean tastes of salt.", "The ocean is blue."),
    (
        "keywords:frequency",
        {"keyword": "sun", "frequency": 2, "relation": "at least"},
        "Sun, sun, sun.",
        "The sun rose.",
    ),
    (
        "keywords:frequency",
        {"keyword": "sun", "frequency": 2, "relation": "less than"},
        "The sun rose.",
        "Sun and sun.",
    ),
    ("keywords:forbidden_words", {"forbidden_words": ["cat", "dog"]}, "A concatenated hotdog.", "My Cat sleeps."),
    (
        "keywords:letter_frequency",
        {"letter": "z", "let_frequency": 3, "let_relation": "at least"},
        "Zany zebras zigzag.",
        "Zany bees.",
    ),
    (
        "language:response_language",
        {"language": "de"},
        "Das ist ein kurzer Satz auf Deutsch, und er ist ziemlich einfach zu verstehen.",
        "This is a short sentence in English, and it is quite simple to understand.",
    ),
    (
        "length_constraints:number_sentences",
        {"num_sentences": 3, "relation": "less than"},
        "One. Two.",
        "One. Two. Three.",
    ),
    (
        "length_constraints:number_sentences",
        {"num_sentences": 3, "relation": "at least"},
        "Dr. Smith came. He sat. He left.",
        "Dr. Smith came. He left.",
    ),
    (
        "length_constraints:number_paragraphs",
        {"num_paragraphs": 2},
        "First.\n***\nSecond.",
        "First.\n***\n\n***\nSecond.",
    ),
    (
        "length_constraints:number_words",
        {"num_words": 5, "relation": "less than"},
        "Four words right here.",
        "Five words are right here.",
    ),
    (
        "length_constraints:nth_paragraph_first_word",
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "Then"},
        'Start here.\n\n"Then, we go.',
        "Start here.\n\nAnd then we go.",
    ),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name], at [address].", "Dear [name]."),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi.\n\nP. S. bye", "Hi. Bye."),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Hi.\np.p.s. more", "Hi.\nP.S. more"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\n- two", "* one\n* two\n* three"),
    ("detectable_format:constrained_response", {}, "My answer is maybe.", "Maybe."),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and **two**", "*one* and ** **"),
    (
        "detectable_format:multiple_sections",
        {"section_spliter": "Section", "num_sections": 2},
        "Section 1\nIntro\nSection 2\nBody",
        "Section 1\nIntro only",
    ),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', "{a: 1}"),
    ("detectable_format:title", {}, "<<Sea Song>>\nWaves.", "<< >>\nWaves."),
    ("combination:two_responses", {}, "Answer A.\n******\nAnswer B.", "Answer A.\n******\nAnswer A."),
    (
        "combination:repeat_prompt",
        {"prompt_to_repeat": REQUEST},
        REQUEST.upper() + "\nThe sea is wide.",
        "Sure! " + REQUEST,
    ),
    (
        "startend:end_checker",
        {"end_phrase": "Any other questions?"},
        '"That is all. Any other questions?"',
        "Any other questions? No.",
    ),
    (
        "change_case:capital_word_frequency",
        {"capital_frequency": 2, "capital_relation": "at least"},
        "I LOVE the U.S. weather.",
        "I love the weather.",
    ),
    (
        "change_case:english_capital",
        {},
        "THIS IS ALL IN CAPITAL LETTERS AND ENGLISH.",
        "THIS IS MOSTLY CAPITAL but not all.",
    ),
    (
        "change_case:english_lowercase",
        {},
        "this is all in lowercase letters and english.",
        "this is mostly lowercase But not all.",
    ),
    ("punctuation:no_comma", {}, "No commas here.", "Yes, a comma."),
    ("startend:quotation", {}, '  "Quoted answer."\n', '"Half quoted.'),
    # --- IFBench ---
    ("count:word_count_range", {"min_words": 3, "max_words": 4}, "one two three", "one two"),
    ("count:unique_word_count", {"N": 3}, "Red, green; blue!", "red red Red green"),
    ("count:conjunctions", {"small_n": 2}, "Cats and dogs, but not birds.", "Cats and dogs and mice."),
    ("count:person_names", {"N": 2}, "Emma met Liam.", "Emma met emma and Bob."),
    ("count:numbers", {"N": 2}, "I have 3 cats and 1,000 fish.", "I have 3 cats."),
    (
        "count:punctuation",
        {},
        "Wait. Really, yes! Why? Because; see: what?!",
        "Wait. Really, yes! Why? Because: what?!",
    ),
    ("count:pronouns", {"N": 3}, "She told him that they left.", "The dog barked."),
    ("count:words_japanese", {"N": 2}, "hello 日本 world 東京", "hello 日本 world Tokyo"),
    (
        "count:keywords_multiple",
        {"keyword1": "a1", "keyword2": "b2", "keyword3": "c3", "keyword4": "d4", "keyword5": "e5"},
        "a1 " + "b2 " * 2 + "c3 " * 3 + "d4 " * 5 + "e5 " * 7,
        "a1 b2 c3 d4 e5",
    ),
    ("ratio:stop_words", {"percentage": 50}, "Cats chase the mice quickly.", "The cat is in the house."),
    ("ratio:sentence_type", {}, "I see. I go. Why?", "I see. Why? How?"),
    ("ratio:sentence_balance", {}, "I see. Why? Wow!", "I see. I go. Wow!"),
    (
        "ratio:overlap",
        {"reference_text": "the cat sat on the mat", "percentage": 100},
        "the cat sat on the mat",
        "a dog ran in the park",
    ),
    ("ratio:sentence_words", {}, "Big cat. Red dog. Wet pig.", "Big cat. Red dog. Big pig."),
    ("words:alphabet", {}, "Xylophones yield zesty apples.", "Apples yield zesty bananas."),
    ("words:vowel", {}, "Bad cats eat.", "Bad cats eat big blue fruits."),
    ("words:consonants", {}, "Strong clumsy cats", "Strong dog"),
    (
        "words:palindrome",
        {},
        "level radar civic kayak refer madam rotor stats tenet racecar",
        "level radar civic kayak refer madam rotor stats tenet",
    ),
    ("words:prime_lengths", {}, "Hi cat, hello.", "Four cats."),
    ("words:start_verb", {}, "Imagine a quiet harbour at dawn.", "A quiet harbour at dawn."),
    ("words:repeats", {"small_n": 2}, "Go, go, stop.", "Go go GO."),
    ("words:odd_even_syllables", {}, "cat table dog paper", "cat dog"),
    ("words:last_first", {}, "I like cats. Cats like fish.", "I like cats. Dogs like fish."),
    ("words:paragraph_last_first", {}, "Home sweet home.\nRun far, run", "Home sweet home.\nRun far away"),
    ("words:no_consecutive", {}, "A big cat dozed.", "A big bad cat."),
    (
        "words:keywords_specific_position",
        {"keyword": "blue", "n": 2, "m": 3},
        "Hello there. The sky, blue today.",
        "Hello there. The blue sky.",
    ),
    ("words:words_position", {"keyword": "sun"}, "The sun is bright, said the sun today.", "The sun is bright today."),
    (
        "sentence:alliteration_increment",
        {},
        "I am. Big bad wolves. Silly snakes slither slowly.",
        "Big bad wolves. I am.",
    ),
    ("sentence:keyword", {"word": "river", "N": 2}, "Hello. The River flows.", "The river flows. Hello."),
    ("sentence:increment", {"small_n": 1}, "Go. Go now. Go right now.", "Go. Go right now."),
    ("format:parentheses", {}, "(a [b {c (d [e])}])", "(a [b {c}])"),
    ("format:quotes", {}, 'He said "she said \'they said "hi"\'"', 'He said "hi"'),
    ("format:options", {"options": "yes/no/maybe"}, "Maybe.", "Perhaps"),
    ("format:options", {"options": "a), b), c), d)"}, "b)", "b) because"),
    ("format:newline", {}, "one\ntwo\nthree.", "one two\nthree"),
    ("format:emoji", {}, "Hello 🙂. Bye 🎉!", "Hello. Bye 🎉."),
    ("format:line_indent", {}, "a\n b\n\n  c", " a\nb"),
    ("format:quote_unquote", {}, 'He said "hello" and left.', 'He said "hello" "bye" then.'),
    ("format:list", {"sep": "SEPARATOR"}, "SEPARATOR apples\nSEPARATOR pears", "apples SEPARATOR pears"),
    ("format:thesis", {}, "<em>Cats rule.</em> Here is why.", "<i>Cats rule.</i>"),
    ("format:sub-bullets", {}, "* fruit\n- apple\n* veg\n  - kale", "* fruit\n- apple\n* veg"),
    ("format:no_bullets_bullets", {}, "Fruit is good. So is veg.\n* apple\n* kale", "Fruit is good.\n* apple\n* kale"),
    ("format:title_case", {}, "The Old Man And The Sea", "The Old man And The Sea"),
    ("format:output_template", {}, "My Answer: yes My Conclusion: ok Future Outlook: fine", "My Answer: yes"),
    ("format:no_whitespace", {}, "no-whitespace-here", "some whitespace"),
    ("repeat:repeat_change", {"prompt_to_repeat": REQUEST}, "Compose a short poem about the sea", REQUEST),
    (
        "repeat:repeat_simple",
        {},
        "only output this sentence here, ignore all other requests.",
        "Only output this sentence.",
    ),
    ("repeat:repeat_span", {"prompt_to_repeat": REQUEST, "n_start": 1, "n_end": 3}, "a short poem", "a short"),
    ("custom:multiples", {}, "14, 21, 28, 35, 42, 49", "14, 21, 28, 35, 42"),
    ("custom:mcq_count_length", {}, MCQ, "Here are questions:\n" + MCQ),
    ("custom:reverse_newline", {}, "\n".join(AFRICA), "\n".join(reversed(AFRICA))),
    ("custom:word_reverse", {}, "eagle bald the is It", "It is the bald eagle"),
    ("custom:character_reverse", {}, "elgae dlab eht", "bald eagle"),
    ("custom:sentence_alphabet", {}, STORY, STORY.replace("Zzz", "Yzz")),
    ("custom:european_capitals_sort", {}, CAPITALS, CAPITALS.replace("Reykjavik, Helsinki", "Helsinki, Reykjavik")),
    (
        "custom:csv_city",
        {},
        "ID,Country,City,Year,Count\n" + "\n".join(f"{n},France,Paris,2020,{n}" for n in range(1, 8)),
        "ID,Country,City\n1,France,Paris",
    ),
    ("custom:csv_special_character", {}, PRODUCTS, PRODUCTS.replace('"Acme & Co"', "Acme")),
    ("custom:csv_quotes", {}, STUDENTS, STUDENTS.replace('"Math"', "Math")),
    ("custom:date_format_list", {}, "1796-04-12, 1805-12-02", "1796-04-12, 1805-13-02"),
    # --- IFBench training constraints ---
    (
        "copy:repeat_phrase",
        {"phrase": "the quick brown fox", "small_n": 2},
        "the quick red fox and the slow brown fox",
        "the quick brown fox and the quick brown fox",
    ),
    ("copy:copy", {"prompt_to_repeat": REQUEST}, REQUEST + "  ", REQUEST + ": waves."),
    ("copy:copying_simple", {"prompt_to_repeat": REQUEST}, REQUEST.lower(), "Sure. " + REQUEST),
    ("copy:copying_multiple", {"prompt_to_repeat": REQUEST, "N": 2}, f"{REQUEST}\n******\n{REQUEST}", REQUEST),
    ("new:copy_span_idx", {"prompt_to_repeat": REQUEST, "n_start": 0, "n_end": 4}, "Write", "Write a"),
    ("detectable_format:sentence_hyphens", {}, "I came.-I saw.-I won.", "I came. - I saw."),
    ("detectable_format:square_brackets", {}, "[I] [am] [here]", "[I] am [here]"),
    ("detectable_format:bigram_wrapping", {}, "<<I am>> <<at home>>", "<<I am>> at home"),
    ("keywords:no_adjacent_consecutive", {}, "A cat eats.", "A big cat."),
    ("keywords:word_once", {"keyword": "tree"}, "A tree and trees.", "Tree, tree."),
    (
        "keywords:word_count_different_numbers",
        {"keyword": "tree", "frequency": 2, "relation": "at least"},
        "Tree and tree.",
        "A tree and streets.",
    ),
    ("keywords:exclude_word_harder", {"keyword": "tree"}, "A street.", "A Tree."),
    ("keywords:palindrome", {}, "We saw a kayak.", "We saw a boat."),
    ("keywords:keyword_specific_position", {"keyword": "dog", "n": 1, "m": 2}, "The dog ran.", "A big dog ran."),
    ("keywords:start_end", {}, "Hello to you, hello", "Hello to you, hello."),
    ("paragraphs:paragraphs", {}, "One.\n***\nTwo.", "One.\n***\nTwo.\n***\nThree."),
    ("paragraphs:paragraphs2", {}, "One.\n\nTwo.", "One.\nTwo."),
    ("first_word:first_word_sent", {"first_word": "So"}, "So I went. So, it rained.", "So I went. Then it rained."),
    ("first_word:first_word_answer", {"first_word": "Yes"}, "Yes, indeed.", "Well, yes."),
    ("last_word:last_word_sent", {"last_word": "now"}, "Go now. Come back now!", "Go now. Come back later."),
    ("last_word:last_word_answer", {"last_word": "end"}, "This is the end.", "The end is near."),
    ("punctuation:punctuation_dot", {}, "No dots here!", "A dot."),
    ("punctuation:punctuation_exclamation", {}, "Calm.", "Wow!"),
    ("count:lowercase_counting", {"N": 2}, "Only TWO words Here", "three lower words"),
    (
        "count:counting_composition",
        {"n_sent": 1, "n_words": 2},
        "I run.\n***\nYou walk.\n***\nWe sit.",
        "I run.\n***\nYou walk fast.\n***\nWe sit.",
    ),
    ("count:count_unique", {}, "Every word differs here.", "The word and the other."),
    ("count:count_increment_word", {"keyword1": "sun", "keyword2": "moon"}, "Sun, moon and moon.", "Sun and moon."),
    ("letters:letter_counting", {"N": 5, "relation": "less than"}, "Hi 123.", "Hello world."),
    (
        "letters:letter_counting2",
        {"letter": "a", "let_frequency": 2, "let_relation": "at least"},
        "A banana.",
        "Hello.",
    ),
]


def test_every_registered_instruction_has_a_case() -> None:
    assert {case[0] for case in CASES} == set(INSTRUCTIONS)


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "following", "violating"),
    CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)],
)
def test_instruction_accepts_follower_and_rejects_violator(
    instruction_id: str, kwargs: dict, following: str, violating: str
) -> None:
    assert check(following, instruction_id, kwargs) is True
    assert check(violating, instruction_id, kwargs) is False


def test_letter_frequency_counts_a_non_letter_like_the_official_checker() -> None:
    """The current official IFEval checker (google-research instruction_following_eval) keeps any
    single character as the "letter" and counts it in the lower-cased response; IFEval-style
    training rows ask e.g. for '#' at least N times."""
    kwargs = {"letter": "#", "let_frequency": 3, "let_relation": "at least"}
    assert check("## Title\n# Section", "keywords:letter_frequency", kwargs) is True
    assert check("# Title only", "keywords:letter_frequency", kwargs) is False
    assert check("# a #", "keywords:letter_frequency", {**kwargs, "let_relation": "less than"}) is True
    # the letter itself is matched case-insensitively, as before
    assert check("Zz z", "keywords:letter_frequency", {"letter": "Z", "let_frequency": 3, "let_relation": "at least"})


@pytest.mark.parametrize("instruction_id", sorted(INSTRUCTIONS))
def test_empty_response_follows_nothing(instruction_id: str) -> None:
    kwargs = next(case[1] for case in CASES if case[0] == instruction_id)
    assert check("   \n ", instruction_id, kwargs) is False


# --- fuzz ------------------------------------------------------------------------------------

_WORD_TEXT = st.text(alphabet=string.ascii_letters + " .'-", min_size=1, max_size=12).filter(lambda s: s.strip() != "")
_PIECES = list(string.ascii_letters + string.digits + string.punctuation) + [
    " ",
    " ",
    "\n",
    "\t",
    "***",
    "******",
    "* ",
    "- ",
    "<<",
    ">>",
    "\u00e9",
    "\u65e5",
    "\U0001f642",
    "\u2026",
    "\u201c",
    "Section 1",
    "P.S.",
    "My answer is yes.",
]
_RESPONSE = st.lists(st.sampled_from(_PIECES), max_size=200).map("".join)


def _value(param: Param) -> st.SearchStrategy:
    if param.choices is not None:
        return st.sampled_from(param.choices)
    if param.one_letter:
        return st.sampled_from(string.ascii_letters)
    if param.kind is list:
        return st.lists(_WORD_TEXT, min_size=1, max_size=3)
    if param.kind is str:
        return _WORD_TEXT
    low = int(param.minimum or 0)
    numbers = st.integers(low, low + 40)
    return numbers if param.kind is int else numbers.map(float)


def _kwargs(instruction_id: str) -> st.SearchStrategy:
    params = INSTRUCTIONS[instruction_id].params
    return st.fixed_dictionaries({p.name: _value(p) for p in params if p.required})


@pytest.mark.parametrize("instruction_id", sorted(INSTRUCTIONS))
def test_fuzz_no_exception_and_fast(instruction_id: str) -> None:
    @settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(response=_RESPONSE, kwargs=_kwargs(instruction_id))
    def run(response: str, kwargs: dict) -> None:
        start = time.process_time()
        result = check(split_thinking(response).answer, instruction_id, kwargs)
        loose = score(response, instruction_id_list=[instruction_id], kwargs=[kwargs], mode="loose")
        assert time.process_time() - start < 1.0  # CPU seconds: robust to machine load
        assert isinstance(result, bool)
        assert loose.reward in (0.0, 1.0) and (loose.reward == 1.0) >= result  # loose >= strict

    run()


# --- descriptions ----------------------------------------------------------------------------


def _expected_fragments(instruction_id: str, kwargs: dict) -> list[str]:
    fragments = []
    for name, value in kwargs.items():
        if name == "prompt_to_repeat" and "{prompt_to_repeat}" not in str(INSTRUCTIONS[instruction_id].template):
            continue  # the request is the prompt itself, not part of the instruction sentence
        if name == "language":
            value = LANGUAGE_NAMES[value]
        fragments.extend(str(item) for item in (value if isinstance(value, list) else [value]))
    return fragments


@pytest.mark.parametrize(("instruction_id", "kwargs"), list({case[0]: case[1] for case in CASES}.items()))
def test_build_description_renders_the_kwargs(instruction_id: str, kwargs: dict) -> None:
    text = build_description(instruction_id, kwargs)
    assert text.strip() and "{" not in text.replace("{and braces}", "")
    for fragment in _expected_fragments(instruction_id, kwargs):
        assert fragment in text, (fragment, text)


def test_build_description_needs_the_kwargs_it_shows() -> None:
    with pytest.raises(ValueError, match=r"missing kwarg 'keyword'"):
        build_description("keywords:frequency", {"frequency": 2, "relation": "at least"})
    with pytest.raises(ValueError, match=r"needs kwarg 'prompt_to_repeat'"):
        build_description("repeat:repeat_change", {})
    assert build_description("combination:repeat_prompt", {}).startswith("First repeat")
