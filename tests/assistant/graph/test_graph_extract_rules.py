"""The ``rules`` extractor: speakers, first-person facts, dates, capitalised spans, keyphrases and
co-occurrence edges, without a model; robust to any text."""

from __future__ import annotations

import pytest

from assistant.config import KnowledgeGraphSettings
from assistant.graph.extract.rules import RulesExtractor
from assistant.graph.store import normalise_name
from assistant.graph.types import ME, RELATED, Extraction, NodeKind, Passage


@pytest.fixture(scope="module")
def rules() -> RulesExtractor:
    return RulesExtractor()


def triples(extraction: Extraction) -> set[tuple[str, str, str]]:
    return {(f.subject, f.relation, f.object) for f in extraction.facts if f.relation != RELATED}


def kinds(extraction: Extraction) -> dict[str, NodeKind]:
    return {e.name: e.kind for e in extraction.entities}


@pytest.mark.parametrize(("text", "fact"), [
    ("I live in Berlin and work at Siemens.", (ME, "lives_in", "Berlin")),
    ("I live in Berlin and work at Siemens.", (ME, "works_at", "Siemens")),
    ("Last year I moved to New York City with my dog.", (ME, "lives_in", "New York City")),
    ("I'm currently working for the Deutsche Bank.", (ME, "works_at", "Deutsche Bank")),
    ("I work as a software engineer at Google.", (ME, "works_as", "software engineer")),
    ("Hi! My name is John Smith.", (ME, "name", "John Smith")),
    ("I'm married to Anna since 2010.", (ME, "married_to", "Anna")),
    ("I study at the University of Chicago.", (ME, "studies_at", "University of Chicago")),
    ("My favourite colour is blue.", (ME, "favourite_colour", "blue")),
    ("my favorite food is pizza", (ME, "favourite_food", "pizza")),
    ("I was born in Lyon.", (ME, "born_in", "Lyon")),
    ("I'm 34 years old.", (ME, "age", "34")),
    ("My brother Paul lives in Rome.", (ME, "has_brother", "Paul")),
    ("I drive a Tesla Model 3.", (ME, "owns_car", "Tesla Model 3")),
    ("My birthday is 2024-03-05.", (ME, "birthday", "5 March 2024")),
    ("I went to a support group yesterday.", (ME, "attended", "support group")),
    ("I went to the Louvre.", (ME, "visited", "Louvre")),
    ("We loved my daughter Sara's birthday.", (ME, "has_daughter", "Sara")),
])
def test_first_person_facts(rules: RulesExtractor, text: str, fact: tuple[str, str, str]) -> None:
    extraction = rules.extract_one(Passage(text))
    assert fact in triples(extraction)
    assert {fact[0], fact[2]} <= {e.name for e in extraction.entities}


def test_fact_kinds_and_functional_relation_names(rules: RulesExtractor) -> None:
    extraction = rules.extract_one(Passage("I live in Berlin and work at Siemens. I'm married to Anna."))
    assert kinds(extraction)["Berlin"] == NodeKind.PLACE
    assert kinds(extraction)["Siemens"] == NodeKind.ORGANISATION
    assert kinds(extraction)["Anna"] == NodeKind.PERSON
    assert kinds(extraction)[ME] == NodeKind.PERSON
    functional = set(KnowledgeGraphSettings().functional_relations)
    assert {r for _, r, _ in triples(extraction)} <= functional


def test_negated_and_past_sentences_are_no_current_facts(rules: RulesExtractor) -> None:
    extraction = rules.extract_one(Passage("I don't live in Berlin anymore. I used to live in Munich."))
    facts = triples(extraction)
    assert not any(r == "lives_in" for _, r, _ in facts)
    assert (ME, "lived_in", "Munich") in facts


def test_a_named_speaker_is_the_subject(rules: RulesExtractor) -> None:
    extraction = rules.extract_one(Passage("On 8 May 2023, Caroline said: I moved to Sweden four years ago.",
                                           speaker="Caroline"))
    assert ("Caroline", "lives_in", "Sweden") in triples(extraction)
    assert kinds(extraction)["Caroline"] == NodeKind.PERSON
    assert ME not in kinds(extraction)


def test_the_user_is_an_entity_only_in_first_person(rules: RulesExtractor) -> None:
    assert ME in kinds(rules.extract_one(Passage("I went hiking with Tom.")))
    assert ME not in kinds(rules.extract_one(Passage("The Eiffel Tower is in Paris.")))


@pytest.mark.parametrize(("text", "date"), [
    ("On 8 May 2023, Caroline said: hi", "8 May 2023"),
    ("The meeting is on May 8th, 2023.", "8 May 2023"),
    ("We met on 2021-06-30 at noon.", "30 June 2021"),
    ("See you in March 2024!", "March 2024"),
    ("It happened in August.", "August"),
    ("We married in May.", "May"),
    ("Since 2019 I run.", "2019"),
    ("Let's meet on Friday.", "Friday"),
    ("Last Fri I took my kids out.", "Friday"),
    ("the 3rd of July", "3 July"),
])
def test_dates_are_written_one_way(rules: RulesExtractor, text: str, date: str) -> None:
    assert kinds(rules.extract_one(Passage(text))).get(date) == NodeKind.DATE


def test_may_the_verb_is_no_date(rules: RulesExtractor) -> None:
    extraction = rules.extract_one(Passage("May I ask you something? It may rain."))
    assert not any(e.kind == NodeKind.DATE for e in extraction.entities)


def test_capitalised_spans_and_their_kinds(rules: RulesExtractor) -> None:
    extraction = rules.extract_one(Passage(
        "Hey Mel! The Eiffel Tower is in Paris. We went to the University of Chicago with Tom. "
        "Yesterday I read about NASA."))
    found = kinds(extraction)
    assert found["Mel"] == NodeKind.PERSON
    assert found["Paris"] == NodeKind.PLACE
    assert found["University of Chicago"] == NodeKind.ORGANISATION
    assert found["Tom"] == NodeKind.PERSON
    assert found["NASA"] == NodeKind.THING
    assert "Eiffel Tower" in found
    for word in ("Hey", "The", "Yesterday", "We", "I", "Hey Mel"):
        assert word not in found


def test_sentence_initial_word_is_a_name_when_capitalised_elsewhere(rules: RulesExtractor) -> None:
    found = kinds(rules.extract_one(Passage("Caroline called. I told Caroline about it.")))
    assert "Caroline" in found
    assert "Good" not in kinds(rules.extract_one(Passage("Good to see you, Caroline!")))


def test_keyphrases_are_lower_case_topics_without_fillers(rules: RulesExtractor) -> None:
    extraction = rules.extract_one(Passage(
        "Yesterday the transgender support group was great and the stories were so inspiring and powerful.",
        speaker="Caroline"))
    topics = [e.name for e in extraction.entities if e.kind == NodeKind.TOPIC]
    assert "support group" in " | ".join(topics)
    assert all(t == t.lower() for t in topics)
    assert not {"inspiring", "powerful", "yesterday"} & set(topics)
    assert len(topics) <= rules.keyphrases


def test_cooccurrence_edges_are_capped_and_canonical(rules: RulesExtractor) -> None:
    text = ("Anna, Bob, Carla, Dieter, Emil, Frida, Gustav and Hanna met in Vienna with Ida on 8 May 2023 "
            "to talk about climate policy and renewable energy.")
    extraction = rules.extract_one(Passage(text))
    related = [f for f in extraction.facts if f.relation == RELATED]
    assert related
    limit = rules.related_limit
    assert len(related) <= limit * (limit - 1) // 2
    pairs = [(normalise_name(f.subject), normalise_name(f.object)) for f in related]
    assert all(a < b for a, b in pairs) and len(set(pairs)) == len(pairs)
    named = {normalise_name(e.name) for e in extraction.entities}
    assert all(a in named and b in named for a, b in pairs)
    assert len(extraction.entities) <= rules.max_entities


def test_a_fact_is_not_repeated_as_cooccurrence(rules: RulesExtractor) -> None:
    extraction = rules.extract_one(Passage("I live in Berlin."))
    assert [(f.subject, f.relation, f.object) for f in extraction.facts] == [(ME, "lives_in", "Berlin")]


def test_same_input_same_output(rules: RulesExtractor) -> None:
    text = "On 8 May 2023, Melanie said: Hey Caroline! I painted a lake sunrise last year in Oregon."
    assert rules.extract([Passage(text, "Melanie")]) == RulesExtractor().extract([Passage(text, "Melanie")])


@pytest.mark.parametrize("text", [
    "", " ", "\n\n", "!!!???", "I", "😀" * 300, "I'M SO HAPPY TODAY!!!", "مرحبا بالعالم", "日本語のテキストです。",
    "Ünïcödé Çafé in Zürich, naïve Ärger", "\x00\x01\x02 control", "I live in", "my favourite", "a" * 20_000,
    ("I live in Berlin. My name is Ann. " * 700)[:20_000], "- " * 10_000, "<script>alert(1)</script>",
])
def test_never_crashes(rules: RulesExtractor, text: str) -> None:
    [extraction] = rules.extract([Passage(text)])
    assert isinstance(extraction, Extraction)
    assert all(e.name and len(e.name) <= 100 for e in extraction.entities)


def test_counters(rules: RulesExtractor) -> None:
    extractor = RulesExtractor()
    extractor.extract([Passage("I live in Berlin."), Passage("Hello there")])
    extractor.extract([])
    counters = extractor.counters()
    assert counters["calls"] == 2 and counters["passages"] == 2 and counters["failures"] == 0
    assert counters["seconds"] >= 0
    assert extractor.id == "rules"


def test_one_fact_per_object(rules: RulesExtractor) -> None:
    assert triples(rules.extract_one(Passage("I went to the Louvre."))) == {(ME, "visited", "Louvre")}
