"""Tests for the language-mixing detector (SPEC sections 5-6, language mixing)."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_rl.rewards.language import detect_mixing, is_mixed, prompt_script, strip_ignored


@pytest.mark.parametrize(
    "text, script",
    [
        ("The answer is 答案 42.", "Han"),
        ("ひらがなで答えます", "Hiragana"),
        ("カタカナ", "Katakana"),
        ("정답은 42입니다", "Hangul"),
        ("Ответ: 42", "Cyrillic"),
        ("الجواب هو 42", "Arabic"),
        ("התשובה היא 42", "Hebrew"),
        ("คำตอบคือ 42", "Thai"),
        ("उत्तर 42 है", "Devanagari"),
        ("উত্তর ৪২", "Bengali"),
        ("விடை 42", "Tamil"),
        ("პასუხი 42", "Georgian"),
        ("պատասխան 42", "Armenian"),
        ("መልስ 42", "Ethiopic"),
        ("rare Han 𠀀 from plane 2", "Han"),
    ],
)
def test_english_prompt_flags_each_foreign_script(text, script):
    result = detect_mixing(text, "Compute 6 * 7.")
    assert result.mixed and script in result.scripts
    assert result.prompt_script == "Latin"
    assert is_mixed(text)  # no prompt counts as English


@pytest.mark.parametrize(
    "text",
    [
        "The answer is $42$.",
        "Café, naïve, Straße, Ångström, São Paulo: Latin with accents is Latin.",
        "Greek is math: α + β = π, Σ x_i, Δ, λ, ω.",
        "Symbols and punctuation: ∀x ∈ ℝ, ∫ f dx ≤ ∞ — “quoted” … ✓ 😀 𝑥 ½ ² ℵ",
        "",
    ],
)
def test_english_without_foreign_letters_is_clean(text):
    result = detect_mixing(text)
    assert not result.mixed and result.scripts == {}


@pytest.mark.parametrize(
    "text",
    [
        "Code:\n```python\n# 计算答案\nprint('答案')\n```\nDone.",
        "Unclosed fence runs to the end:\n```\n中文注释",
        "Inline `变量名` stays code.",
        "Math $\\text{面积} = 3$ and $$\\text{体积}=4$$ and \\(\\text{长}\\) and \\[\\text{宽}\\].",
        "\\begin{align} \\text{方程} &= 1 \\end{align}",
        "Source: https://zh.wikipedia.org/wiki/数学 and www.例子.com/页面 ok",
    ],
)
def test_code_latex_and_urls_are_ignored(text):
    assert not is_mixed(text)


def test_text_outside_ignored_spans_still_counts():
    assert detect_mixing("`code` then 中文 then $x$").scripts == {"Han": 2}
    # an unmatched opener does not swallow the rest of the text
    assert is_mixed("Costs \\$5 today, 中文") and is_mixed("one $ sign then 中文")
    assert is_mixed("\\[ unclosed display math, then 中文")


@pytest.mark.parametrize(
    "prompt, script, same_language_answer, mixed_answer",
    [
        ("请计算 x 的值", "Han", "答案是 42，因为 x = 6", "答案是 42 это так"),
        ("xの値を求めなさい。", "Japanese", "答えは42です。計算します。", "答えは42, 정답"),
        ("Найдите значение x", "Cyrillic", "Ответ: 42", "Ответ: 42, 答案"),
        ("이 문제를 풀어라", "Hangul", "정답은 42", "정답은 42 答案"),
        ("احسب قيمة x", "Arabic", "الجواب 42", "الجواب 42 ответ"),
    ],
)
def test_non_english_prompt_allows_its_script_latin_and_greek(prompt, script, same_language_answer, mixed_answer):
    assert prompt_script(prompt) == script
    assert not is_mixed(same_language_answer, prompt)
    assert not is_mixed("Latin is allowed too: def solve(): return 42, α = π", prompt)
    assert is_mixed(mixed_answer, prompt)


def test_chinese_prompt_flags_japanese_kana():
    assert detect_mixing("答案是 ひらがな", "请计算").scripts == {"Hiragana": 4}


def test_prompt_as_chat_messages_and_cjk_weight():
    messages = [
        {"role": "system", "content": "Réponds en anglais"},
        {"role": "user", "content": "请计算 value x /think"},
    ]
    assert prompt_script(messages) == "Han"  # 3 Han letters weigh 9 > 6 Latin letters
    assert prompt_script("Solve for x; 数 is a character") == "Latin"
    assert prompt_script("42 + 7 = ?") == "Latin"
    assert prompt_script(None) == "Latin"


def test_min_letters_threshold():
    assert is_mixed("one stray 字 character")
    assert not is_mixed("one stray 字 character", min_letters=2)
    assert is_mixed("two stray 字字 characters", min_letters=2)
    with pytest.raises(ValueError, match="min_letters"):
        detect_mixing("text", min_letters=0)
    with pytest.raises(TypeError, match="text must be a str"):
        detect_mixing(None)  # type: ignore[arg-type]


def _per_call_seconds(text: str, prompt: str | None = None, repeat: int = 20) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        detect_mixing(text, prompt)
    return (time.perf_counter() - start) / repeat


def test_20kb_response_is_scanned_in_about_a_millisecond():
    paragraph = "We expand $(x+1)^2 = x^2 + 2x + 1$ and note café, α, “quotes” and `code`. "
    latin = (paragraph * 300)[:20_000]
    detect_mixing(latin + "中")  # build the cached patterns
    assert _per_call_seconds("x" * 20_000) < 1e-4
    assert _per_call_seconds(latin) < 2e-3
    assert _per_call_seconds(latin + "中") < 5e-3
    assert _per_call_seconds("中文回答" * 5_000, "请计算") < 2e-3


@pytest.mark.parametrize(
    "adversarial",
    [
        "\\[ 中 " * 4000,
        "\\( " * 6000,
        "\\begin{a} " * 2000,
        "$$ " * 7000,
        "``` 中" * 4000,
        "` " * 10000,
        "$ \n" * 7000,
        "http://" * 3000,
        "\\begin{a}\\begin{b}中" * 1000,
    ],
)
def test_unclosed_openers_stay_linear(adversarial):
    start = time.perf_counter()
    strip_ignored(adversarial)
    detect_mixing(adversarial)
    assert time.perf_counter() - start < 0.5


_MIXED_ALPHABET = st.sampled_from(
    list("ab $`\\{}[]()\n\t中文ひカ한Яαπ😀𠀀:/.w~")
    + ["```", "$$", "\\[", "\\]", "\\(", "\\)", "\\begin{x}", "\\end{x}", "https://", "www.", "\\$"]
)


@settings(max_examples=300, deadline=1000)
@given(
    st.lists(_MIXED_ALPHABET, max_size=400).map("".join), st.one_of(st.none(), st.text(max_size=50)), st.integers(1, 5)
)
def test_fuzz_never_raises_and_is_consistent(text, prompt, min_letters):
    result = detect_mixing(text, prompt, min_letters=min_letters)
    assert result.mixed == (sum(result.scripts.values()) >= min_letters)
    assert "Latin" not in result.scripts and "Greek" not in result.scripts
    assert is_mixed(text, prompt, min_letters=min_letters) == result.mixed


@settings(max_examples=200, deadline=1000)
@given(st.text(max_size=2000), st.one_of(st.none(), st.text(max_size=100)))
def test_fuzz_arbitrary_unicode(text, prompt):
    result = detect_mixing(text, prompt)
    assert result.mixed == bool(result.scripts)
