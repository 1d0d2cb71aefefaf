import pytest

from cascade_rl.data.hygiene import decontaminate, dedup
from cascade_rl.text import words


def test_nine_gram_overlap_is_dropped_and_eight_gram_is_not():
    test = ["the quick brown fox jumps over the lazy dog near the river bank"]
    nine = {"text": "Intro: The quick brown fox, jumps over the lazy dog near! something else"}
    eight = {"text": "the quick brown fox jumps over the lazy cat"}
    kept, dropped = decontaminate([nine, eight], test, lambda r: r["text"], n=9)
    assert kept == [eight] and dropped == 1


def test_dedup_keeps_first_exact_prompt_ignoring_whitespace():
    rows = [{"p": "a  b"}, {"p": "a b"}, {"p": "a c"}]
    kept, dropped = dedup(rows, key=lambda r: r["p"])
    assert kept == [{"p": "a  b"}, {"p": "a c"}] and dropped == 1


def test_words_lowercase_and_strip_punctuation():
    assert words("Hello, World! 42x") == ["hello", "world", "42x"]


def test_ngram_index_reports_each_benchmark_and_confirms_hits():
    from cascade_rl.data.hygiene import NgramIndex

    index = NgramIndex(9)
    index.add("aime", ["Find the number of ordered pairs of positive integers m and n such that m plus n is 100."])
    index.add("gpqa", ["Which gas makes up most of the air?", "a b c d e f g h i j k"])
    texts = [
        "Intro. Find the NUMBER of ordered pairs, of positive integers m and n such that, m plus n = 7",
        "which gas makes up most of the air",  # the same words as a short (under 9 words) test text
        "which gas makes up most of the air today",  # not the same text: no 9-gram, kept
        "c d e f g h i j k and find the number of ordered pairs of positive integers m and",
        "nothing to see here at all in this sentence about cooking rice",
    ]
    found = index.matches(texts)
    assert found[0] == {"aime": "find the number of ordered pairs of positive integers"}
    assert found[1] == {"gpqa": "which gas makes up most of the air"}
    assert found[2] == {} and found[4] == {}
    assert set(found[3]) == {"aime", "gpqa"}
    assert index.grams_per_benchmark == {"aime": 11, "gpqa": 3}  # 19 words; 11 words


@pytest.mark.parametrize("group_chars", [1 << 18, 200])  # texts hashed together or in many small groups
def test_ngram_index_agrees_with_the_set_of_ngrams_on_random_text(group_chars, monkeypatch):
    import random

    from cascade_rl.data import hygiene

    monkeypatch.setattr(hygiene, "GROUP_CHARS", group_chars)

    from cascade_rl.data.hygiene import NgramIndex, ngram_index, ngrams

    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(40)]  # a small vocabulary: many near-miss 8-grams
    tests = [" ".join(rng.choices(vocabulary, k=30)) for _ in range(50)]
    train = [" ".join(rng.choices(vocabulary, k=rng.randint(0, 40))) for _ in range(400)]
    train += [t[: len(t) // 2] + " " + tests[i][:60] for i, t in enumerate(train[:40])]
    index = NgramIndex(4)
    index.add("bench", tests)
    naive = ngram_index(tests, 4)
    expected = [any(g in naive for g in ngrams(t, 4)) for t in train]
    assert [bool(m) for m in index.matches(train)] == expected
    assert 10 < sum(expected) < len(train)


# issue 19: dedup as users mean it -- whitespace and case by default, levels on request
@pytest.mark.parametrize(
    "level,same",
    [
        ("exact", [("a b", "a b")]),
        ("whitespace", [("a  b\n", "a b")]),
        ("whitespace-case", [("a  b\n", "a b"), ("What is 2+2?", "what is 2+2?")]),
        ("whitespace-case-punctuation", [("What is 2+2?", "what is 2+2"), ("Hello, world!", "hello world")]),
    ],
)
def test_dedup_text_levels(level, same):
    from cascade_rl.data.hygiene import dedup_text

    for first, second in same:
        assert dedup_text(first, level) == dedup_text(second, level)
    # each level keeps apart what the next one merges
    assert dedup_text("x = 3.5", level) != dedup_text("x = 35", level)


def test_dedup_default_ignores_case_and_whitespace_only():
    from cascade_rl.data.hygiene import DEFAULT_DEDUP_LEVEL, dedup_text

    rows = [{"p": "What is 2+2?"}, {"p": "what  is 2+2?"}, {"p": "What is 2+2"}]
    kept, dropped = dedup(rows, key=lambda r: r["p"])
    assert DEFAULT_DEDUP_LEVEL == "whitespace-case"
    assert kept == [{"p": "What is 2+2?"}, {"p": "What is 2+2"}] and dropped == 1
    assert dedup(rows, key=lambda r: r["p"], level="whitespace-case-punctuation")[1] == 2
    assert dedup(rows, key=lambda r: r["p"], level="exact")[1] == 0
    assert dedup_text("a  B", "whitespace") == "a B"
    with pytest.raises(ValueError, match="exact, whitespace, whitespace-case, whitespace-case-punctuation"):
        dedup_text("x", "case")


def test_ngrams_a_benchmark_repeats_in_several_questions_are_its_template_not_content():
    from cascade_rl.data.hygiene import NgramIndex

    ask = "Please reason step by step and put your final answer within boxed braces."
    index = NgramIndex(9)
    questions = [
        "Tom has 3 apples and buys 5 more at the market on Sunday.",
        "A baker fills twelve trays with rolls before the shop opens its doors.",
        "Lena walks her dog around the lake twice every evening after dinner.",
    ]
    index.add("gsm", [f"{q} {ask}" for q in questions], template=0.5)
    found = index.matches(
        [
            f"Anna sells pears to her neighbours every single morning. {ask}",  # the template only: kept
            "Tom has 3 apples and buys 5 more at the market.",  # one question's content: dropped
            "Mia reads to her cat every evening after dinner. " + ask,  # 4 words of content, then the template: kept
        ]
    )
    assert found[0] == {} and found[2] == {}
    assert found[1] == {"gsm": "tom has 3 apples and buys 5 more at"}
    assert index.templates["gsm"] == [("please reason step by step and put your final answer within boxed braces", 3)]


def test_a_copy_of_a_templated_question_is_caught_whole():
    from cascade_rl.data.hygiene import NgramIndex

    questions = [f"Tom has {a} apples and buys {a + 2} more. How many apples does he have now?" for a in (7, 8, 9)]
    index = NgramIndex(9)
    index.add("gsm", questions, template=0.5)
    found = index.matches(["TOM has 8 apples, and buys 10 more: how many apples does he have now", questions[0]])
    assert found[0] == {"gsm": "tom has 8 apples and buys 10 more how many apples does he have now"}
    assert found[1] == {"gsm": "tom has 7 apples and buys 9 more how many apples does he have now"}
    assert index.matches(["Tom has 3 apples and buys 5 more. How many apples does he have now?"]) == [{}]


def test_a_template_shorter_than_the_n_gram_is_found_by_its_words(tmp_path):
    """MBPP's converted questions hold "Your code should pass this test: ```python assert" (8
    words) before a test that differs in every row: no 9-gram of it is common, yet every 9-gram
    across its edge was, and MBPP's own training rows lost 374 of 374 to them (issue 42)."""
    from cascade_rl.data.hygiene import NgramIndex

    def mbpp(task: str, call: str) -> str:
        return f"{task}\nYour code should pass this test:\n```python\nassert {call}\n```\nAnswer in one block."

    tests = [
        mbpp("Write a function to find the perimeter of a square.", "square_perimeter(10) == 40"),
        mbpp("Write a function to reverse the words of a sentence.", "reverse_words('a b') == 'b a'"),
        mbpp("Write a function to count the vowels in a given string.", "count_vowels('abe') == 2"),
        mbpp("Write a python function to sort a list of tuples by their second item.", "sort_second([(1, 2)])"),
    ]
    training = [
        mbpp("Write a function to find the diagonal of a square.", "diagonal(1) == 1.41"),  # another task
        "Please sort a list of tuples by their second item in place, without a key function.",
    ]
    literal = NgramIndex(9)
    literal.add("mbpp", tests)
    assert literal.matches(training[:1]) == [{"mbpp": "of a square your code should pass this test"}]
    index = NgramIndex(9)
    index.add("mbpp", tests, template=0.5)
    assert index.matches(training) == [{}, {"mbpp": "sort a list of tuples by their second item"}]
    assert index.templates["mbpp"][0] == ("your code should pass this test python assert", 4)
    assert index.matches([tests[2]]) == [{"mbpp": " ".join(words(tests[2]))}]  # a whole copy is caught
