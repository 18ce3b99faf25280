"""Word count: the number of times each word has appeared in a stream of sentences.

Topics and formats:

- input ``sentences``: key = anything (a UTF-8 string or none; not used), value = a sentence (UTF-8
  string), timestamp = when it was written. A record with a None value has no words.
- output ``word-counts``: key = a word (UTF-8 string, lowercase), value = the word's count so far
  (a JSON number), timestamp = the largest timestamp of the sentences counted for that word. One record
  per word occurrence: the newest record of a word is its current count (read the topic as a table).

Words are the sentence's lowercase runs of letters, digits and apostrophes (``"Don't stop!"`` ->
``don't``, ``stop``). The words are repartitioned by word through
``<application_id>-words-repartition``; the counts are in the key-value store ``word-counts-store``
(changelog ``<application_id>-word-counts-store-changelog``), restored from it on restart.

Run: ``streamproc run topologies.wordcount --bootstrap-servers localhost:9092 --application-id wordcount``.
"""

from __future__ import annotations

import re

from streamproc import serde
from streamproc.dsl import StreamsBuilder, Topology

__all__ = ["INPUT", "OUTPUT", "REPARTITION", "STORE", "build", "words"]

INPUT = "sentences"
OUTPUT = "word-counts"
STORE = "word-counts-store"
REPARTITION = "words"
_WORD = re.compile(r"[\w']+")


def words(sentence: str | None) -> list[str]:
    """The lowercase words of ``sentence`` (none for None)."""
    return [] if sentence is None else _WORD.findall(sentence.lower())


def build(*, input: str = INPUT, output: str = OUTPUT) -> Topology:
    """The word-count topology (topic names overridable)."""
    b = StreamsBuilder()
    (b.stream(input, key_serde=serde.STRING, value_serde=serde.STRING)
      .flat_map_values(words, name="split-words")
      .group_by(lambda key, word: word, key_serde=serde.STRING, value_serde=serde.STRING, name=REPARTITION)
      .count(name=STORE)
      .to_stream()
      .to(output, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


topology = build()
