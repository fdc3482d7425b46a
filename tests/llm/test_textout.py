"""Stop strings and incremental UTF-8, shared by the engines that decode tokens themselves."""

from ragraph.runtime.llm.textout import OutputText


def feed(out: OutputText, pieces: list[bytes | str]) -> str:
    return "".join(out.add(p) for p in pieces) + out.flush()


def test_no_stop_passes_text_through() -> None:
    out = OutputText()
    assert feed(out, [" Paris", " is", " nice"]) == " Paris is nice"
    assert out.text == " Paris is nice"
    assert not out.stopped


def test_stop_inside_one_token_is_cut_before_the_stop_string() -> None:
    out = OutputText(("\n",))
    assert feed(out, [" Paris", ".\nQuestion"]) == " Paris."
    assert out.stopped
    assert out.text == " Paris."


def test_stop_split_across_tokens_is_held_back_then_cut() -> None:
    out = OutputText(("Question:",))
    emitted = [out.add(" Paris."), out.add(" Ques"), out.add("tion"), out.add(": who")]
    # " " is safe to emit (no stop string starts with it); "Ques" and "tion" are held.
    assert emitted == [" Paris.", " ", "", ""]
    assert out.stopped
    assert out.text == " Paris. "


def test_held_back_text_is_released_when_it_is_not_a_stop() -> None:
    out = OutputText(("Question:",))
    assert out.add(" Ques") == " "
    assert out.add("ts") == "Quests"
    assert out.text == " Quests"


def test_held_text_released_at_flush() -> None:
    out = OutputText(("###",))
    assert out.add(" end #") == " end "
    assert out.flush() == "#"
    assert out.text == " end #"


def test_earliest_of_several_stops_wins() -> None:
    out = OutputText(("b", "a"))
    feed(out, ["xxab"])
    assert out.text == "xx"


def test_multibyte_character_split_across_tokens() -> None:
    out = OutputText()
    euro = "€".encode()
    assert out.add(euro[:1]) == ""
    assert out.add(euro[1:]) == "€"
    assert out.text == "€"
