"""The words of ``cascade data constrain`` (:mod:`cascade_rl.data.constrain`): the instruction ids
of the IFEval and IFBench-training families, and the word lists that kwargs and the witness
answers are made of (never IFEval's prompts)."""

from __future__ import annotations

from cascade_rl.rewards.ifeval import IFEVAL_IDS, IFTRAIN_IDS
from cascade_rl.world.instructions import KEYWORDS as TOY_KEYWORDS

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
