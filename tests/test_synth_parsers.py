"""Parsers of LLM answers: exact cases, and property tests with random and adversarial text.

Properties: a parser never raises, whatever the text; and whatever it accepts is well formed
(the value is the plain text of the right block, within the length limits, not a copy of the
prompt or of the original)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dualview.synth.parsing import has_markup, normalize
from dualview.synth.poison import FIELDS, PoisonConfig, parse_poison
from dualview.synth.reverse import ReverseTask, parse_reverse
from dualview.synth.seed import SeedConfig, parse_seed
from dualview.synth.templates import load_template
from dualview.synth.verify import parse_choice

ORIGINAL = "Only passages about adults are relevant."
FRAGMENTS = ReverseTask().template.fragments
SEED_FRAGMENTS = load_template("seed").fragments
POISON_FRAGMENTS = load_template("poison").fragments
POSITIVE = "A long passage about adult sleep habits and what the studies say about them."

TAGS = ["answer", "new_instruction", "instruction", "negative", *FIELDS]
PIECES = (
    [f"<{t}>" for t in TAGS]
    + [f"</{t}>" for t in TAGS]
    + [
        "None",
        "none.",
        "[1]",
        "[7]",
        "3",
        " ",
        "\n",
        "<",
        ">",
        "</",
        "<b>",
        ORIGINAL,
        "...your new instruction here...",
        "Only passages about children count here.",
        "Focus on teenagers who sleep badly at night.",
        "A passage written for checking with more than twelve words in it, about the topic.",
    ]
)
adversarial = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)
any_text = st.one_of(st.text(max_size=400), adversarial)


def test_reverse_cases() -> None:
    good = "<answer><new_instruction>Only passages about children count.</new_instruction></answer>"
    assert parse_reverse(good, ORIGINAL, FRAGMENTS).value == "Only passages about children count."
    assert parse_reverse("<answer>NONE</answer>", ORIGINAL, FRAGMENTS).status == "impossible"
    assert parse_reverse(good + good, ORIGINAL, FRAGMENTS).ok  # an identical repeat is harmless
    base = (
        "I am only interested in results from animal experiments; studies on human "
        "participants are not relevant, and neither is advice on"
    )
    answer = f"<answer><new_instruction>{base} sleep.</new_instruction></answer>"
    assert parse_reverse(answer, ORIGINAL, FRAGMENTS).ok  # no examples given: accepted
    rejected = parse_reverse(answer, ORIGINAL, FRAGMENTS, examples=(f"{base} brewing.",))
    assert rejected.reason.startswith("echoes_prompt")
    bad = {
        "": "no_answer",
        "<answer></answer>": "malformed",
        "<answer><new_instruction></new_instruction></answer>": "empty_instruction",
        f"<answer><new_instruction>{ORIGINAL.upper()}</new_instruction></answer>": (
            "same_as_original"
        ),
        "<answer><new_instruction>Rules:</new_instruction> x</answer>": "malformed",
    }
    for text, code in bad.items():
        parsed = parse_reverse(text, ORIGINAL, FRAGMENTS)
        assert parsed.status == "rejected" and parsed.reason.startswith(code), (text, parsed)


def test_a_worked_examples_original_instruction_is_no_reversal() -> None:
    """The 1.5B writer answered with a worked example's *original* instruction word for
    word (and reworded): the task rejects it as an echo, like a copy of the example's
    answer. Before, only the answers were checked."""
    task = ReverseTask()
    originals = [e.instruction for e in task.examples]
    assert originals and set(originals) <= set(task.example_texts)
    for original in originals:
        words = original.rstrip(".").split()
        reworded = " ".join([*words[:-1], "gardening."])
        for text in (original, reworded):
            answer = f"<answer><new_instruction>{text}</new_instruction></answer>"
            parsed = parse_reverse(
                answer, ORIGINAL, task.template.fragments, examples=task.example_texts
            )
            assert parsed.status == "rejected", (text, parsed)
            assert parsed.reason.startswith("echoes_prompt"), (text, parsed)


@settings(max_examples=400, deadline=None)
@given(any_text)
def test_reverse_parser_never_raises_and_accepts_only_well_formed(text: str) -> None:
    parsed = parse_reverse(text, ORIGINAL, FRAGMENTS, inputs=(POSITIVE,))
    assert parsed.status in ("ok", "impossible", "rejected")
    if parsed.ok:
        value = parsed.value
        assert isinstance(value, str) and value == value.strip()
        assert "<new_instruction>" in text.lower() and "</answer>" in text.lower()
        assert value in " ".join(text.split())
        assert not has_markup(value) and len(value.split()) >= 3 and len(value) <= 600
        assert normalize(value) not in (normalize(ORIGINAL), "none")
    else:
        assert parsed.value is None and parsed.reason


def test_seed_cases() -> None:
    neg = "A passage on the same topic " + "with many extra words to pass the minimum " * 2
    good = (
        "<answer><instruction>Only studies of adults count.</instruction>"
        f"<negative>{neg}</negative></answer>"
    )
    parsed = parse_seed(good, POSITIVE, SEED_FRAGMENTS, SeedConfig())
    assert (
        parsed.ok
        and parsed.value[0] == "Only studies of adults count."
        and len(parsed.value[1]) == 1
    )
    dup = good.replace("</answer>", f"<negative>{neg}</negative></answer>")
    assert parse_seed(dup, POSITIVE, SEED_FRAGMENTS, SeedConfig()).reason.startswith("duplicate")
    four = good.replace(
        "</answer>", "".join(f"<negative>{neg} {i}</negative>" for i in range(3)) + "</answer>"
    )
    assert parse_seed(four, POSITIVE, SEED_FRAGMENTS, SeedConfig()).reason.startswith("malformed")


def test_seed_rejects_pieces_and_near_copies_of_the_positive() -> None:
    # what the embedded 0.5B model wrote for an MS MARCO query: both fields lifted from P+
    positive = (
        "Secura Personal Cleanser is an antimicrobial skin cleanser used for body cleansing. "
        "It is formulated for incontinence cleanup and aids in removal of foreign material. "
        "It is for external use only; avoid contact with your eyes."
    )
    piece = "It is formulated for incontinence cleanup and aids in removal of foreign material."
    own = "A passage about hand soap brands, their prices and where shops stock them in town."

    def answer(instruction: str, *negatives: str) -> str:
        blocks = "".join(f"<negative>{n}</negative>" for n in negatives)
        return f"<answer><instruction>{instruction}</instruction>{blocks}</answer>"

    def reason(text: str) -> str:
        return parse_seed(text, positive, SEED_FRAGMENTS, SeedConfig()).reason

    assert parse_seed(answer("Only skin-care products count.", own), positive, (), SeedConfig()).ok
    assert reason(answer(piece, own)).startswith("echoes_prompt")
    assert reason(answer("Only skin-care products count.", piece)).startswith("duplicate")
    reworded = positive.replace("antimicrobial", "gentle").replace("body", "skin")
    assert reason(answer("Only skin-care products count.", reworded)).startswith("duplicate")
    copy_of_first = own.replace("prices", "costs")
    assert reason(answer("Only skin-care products.", own, copy_of_first)).startswith("duplicate")
    # the instruction is the negative passage (the model's most common seeding failure)
    assert reason(answer(own, own)).startswith("echoes_prompt")
    assert reason(answer(own[:60], own)).startswith("echoes_prompt")


def test_reverse_rejects_prompt_echoes_despite_punctuation_and_passage_labels() -> None:
    # both were accepted from the embedded 0.5B model before parser version 4
    for text in (
        "Under the new instruction, the TARGET passage is relevant.",
        "Only documents like [T] count; the rest do not.",
    ):
        answer = f"<answer><new_instruction>{text}</new_instruction></answer>"
        assert parse_reverse(answer, ORIGINAL, FRAGMENTS).reason.startswith("echoes_prompt")
    fine = "Only documents that target teenagers count; the rest do not."
    assert parse_reverse(
        f"<answer><new_instruction>{fine}</new_instruction></answer>", ORIGINAL, FRAGMENTS
    ).ok


def test_reverse_rejects_a_piece_of_a_passage() -> None:
    passage = "Adults who sleep under six hours a night report more colds, a cohort study found."
    piece = "Adults who sleep under six hours a night report more colds"
    answer = f"<answer><new_instruction>{piece}</new_instruction></answer>"
    assert parse_reverse(answer, ORIGINAL, FRAGMENTS).ok  # no passage given
    rejected = parse_reverse(answer, ORIGINAL, FRAGMENTS, inputs=(passage,))
    assert rejected.reason.startswith("echoes_prompt")


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_seed_parser_never_raises_and_accepts_only_well_formed(text: str) -> None:
    parsed = parse_seed(text, POSITIVE, SEED_FRAGMENTS, SeedConfig())
    assert parsed.status in ("ok", "rejected")
    if parsed.ok:
        instruction, negatives = parsed.value
        assert 1 <= len(negatives) <= 3 and len({normalize(n) for n in negatives}) == len(negatives)
        assert all(len(n.split()) >= 12 and not has_markup(n) for n in negatives)
        assert not has_markup(instruction) and len(instruction.split()) >= 3


def test_poison_cases() -> None:
    passage = "A passage that fits the changed request " + "with enough words to count " * 2
    parts = {
        "changed_instruction": "Only passages about children count.",
        "changed_instruction_passage": passage + "one",
        "changed_query": "sleep habits of teenagers",
        "changed_query_passage": passage + "two",
    }
    text = "<answer>" + "".join(f"<{k}>{v}</{k}>" for k, v in parts.items()) + "</answer>"
    args = ("adult sleep", ORIGINAL, POSITIVE, POISON_FRAGMENTS, PoisonConfig())
    assert parse_poison(text, *args).value == parts
    same = text.replace(parts["changed_query"], "adult sleep")
    assert parse_poison(same, *args).reason.startswith("same_as_original")
    twin = text.replace(passage + "two", passage + "one")
    assert parse_poison(twin, *args).reason.startswith("duplicate_passage")
    assert parse_poison(text.replace("<changed_query>", ""), *args).status == "rejected"


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_poison_parser_never_raises_and_accepts_only_well_formed(text: str) -> None:
    parsed = parse_poison(text, "adult sleep", ORIGINAL, POSITIVE, POISON_FRAGMENTS, PoisonConfig())
    assert parsed.status in ("ok", "rejected")
    if parsed.ok:
        assert set(parsed.value) == set(FIELDS)
        assert all(v and not has_markup(v) for v in parsed.value.values())


def test_choice_cases() -> None:
    assert parse_choice("<answer>[3]</answer>", 4).value == 3
    assert parse_choice("I pick <answer> 2 </answer>", 4).value == 2
    assert parse_choice("<answer>[5]</answer>", 4).reason.startswith("out_of_range")
    assert parse_choice("<answer>[0]</answer>", 4).status == "rejected"
    assert parse_choice("<answer>2 or 3</answer>", 4).status == "rejected"
    assert parse_choice(" [2]\n", 4).value == 2  # a bare choice is unambiguous
    assert parse_choice("I pick [2]", 4).reason.startswith("no_answer")


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(any_text, st.from_regex(r"<answer>\s*\[?-?\d{1,4}\]?\s*</answer>")),
    st.integers(1, 12),
)
def test_choice_parser_never_raises_and_accepts_only_in_range(text: str, n: int) -> None:
    parsed = parse_choice(text, n)
    assert parsed.status in ("ok", "rejected")
    if parsed.ok:
        assert isinstance(parsed.value, int) and 1 <= parsed.value <= n
        assert str(parsed.value) in text
