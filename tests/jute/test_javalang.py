"""Java's number and boolean grammars and String.split (:mod:`trizk.jute.javalang`).

First the cases each grammar is about, written out; then the oracle: the same inputs and a few
thousand seeded random ones (signs, radix prefixes, blanks, underscores, letters, non-ASCII
and supplementary digits, values around every range limit) go through ``java.lang`` itself
(a small program run by the installed JDK, ``java File.java``) and every answer must agree.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from trizk.jute import javalang as J

CASES: list[tuple[str, int | None, int | None]] = [
    # text, Integer.parseInt, Integer.decode
    ("0", 0, 0),
    ("+5", 5, 5),
    ("-5", -5, -5),
    ("2147483647", 2**31 - 1, 2**31 - 1),
    ("2147483648", None, None),
    ("-2147483648", -(2**31), -(2**31)),
    ("-2147483649", None, None),
    ("0x10", None, 16),
    ("0X10", None, 16),
    ("#10", None, 16),
    ("-0x80000000", None, -(2**31)),
    ("0x80000000", None, None),
    ("010", 10, 8),
    ("08", 8, None),
    ("00", 0, 0),
    ("-0", 0, 0),
    ("", None, None),
    ("-", None, None),
    ("+", None, None),
    ("+-5", None, None),
    ("0x", None, None),
    ("#", None, None),
    ("0x-5", None, None),
    ("-#5", None, -5),
    (" 5", None, None),
    ("5 ", None, None),
    ("1_000", None, None),
    ("1e3", None, None),
    ("\u0663", 3, 3),  # ARABIC-INDIC DIGIT THREE
    ("\uff13\uff12", 32, 32),  # FULLWIDTH DIGITS THREE TWO
    ("0x\uff26", None, 15),  # FULLWIDTH LATIN CAPITAL F: a hex digit
    ("\U0001d7d1", None, None),  # MATHEMATICAL BOLD DIGIT THREE: a surrogate pair in Java
    ("\u00b2", None, None),  # SUPERSCRIPT TWO: a number, not a decimal digit
]


@pytest.mark.parametrize(("text", "parsed", "decoded"), CASES)
def test_int_grammars(text: str, parsed: int | None, decoded: int | None) -> None:
    assert J.parse_int(text) == parsed
    assert J.decode_int(text) == decoded


def test_long_grammars_and_radix() -> None:
    assert J.parse_long("9223372036854775807") == 2**63 - 1
    assert J.parse_long("9223372036854775808") is None
    assert J.decode_long("-0x8000000000000000") == -(2**63)
    assert J.parse_long("ff", 16) == 255 and J.parse_long("-FF", 16) == -255
    assert J.parse_long("fg", 16) is None and J.parse_int("z", 36) == 35
    assert J.parse_integer("99999999999999999999") == 99999999999999999999
    assert J.decode_integer("-0x1" + "0" * 20) == -(16**20)


def test_java_split() -> None:
    assert J.java_split("", ":") == [""]  # no match: the text itself
    assert J.java_split("a", ":") == ["a"]
    assert J.java_split(":", ":") == [] and J.java_split("a::", ":") == ["a"]
    assert J.java_split(":a", ":") == ["", "a"]  # a leading empty piece stays
    assert J.java_split("a=1,,b=2;", re.compile(r"[,;]+")) == ["a=1", "b=2"]


def test_property_getters() -> None:
    props = {"i": "0x20", "bad": "12abc", "big": "4294967296", "b": "TRUE", "n": "false"}
    assert J.get_integer(props, "i", 7) == 32
    assert J.get_integer(props, "bad", 7) == 7  # Integer.getInteger: silently the default
    assert J.get_integer(props, "big", 7) == 7
    assert J.get_long(props, "big", 7) == 2**32
    assert J.get_integer(props, "absent", 7) == 7
    assert J.get_boolean(props, "b") and not J.get_boolean(props, "n")
    assert not J.get_boolean(props, "absent")
    assert J.parse_boolean("tRuE") and not J.parse_boolean(" true") and not J.parse_boolean(None)


# ------------------------------------------------------------------------------- the oracle

ORACLE = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;

public class JavaLangOracle {
    static String pieces(String[] parts) {
        StringBuilder b = new StringBuilder(String.valueOf(parts.length));
        for (String p : parts) {
            b.append(',');
            for (byte x : p.getBytes(StandardCharsets.UTF_8)) b.append(String.format("%02x", x));
        }
        return b.toString();
    }
    static String show(java.util.concurrent.Callable<Object> f) {
        try { return String.valueOf(f.call()); }
        catch (NumberFormatException e) { return "NFE"; }
        catch (Exception e) { return "ERR " + e; }
    }
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(
            new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            byte[] raw = new byte[line.length() / 2];
            for (int i = 0; i < raw.length; i++) {
                raw[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            }
            final String s = new String(raw, StandardCharsets.UTF_8);
            out.println(String.join(" ",
                show(() -> Integer.parseInt(s)), show(() -> Long.parseLong(s)),
                show(() -> Integer.parseInt(s, 16)), show(() -> Long.parseLong(s, 36)),
                show(() -> Integer.decode(s)), show(() -> Long.decode(s)),
                String.valueOf(Boolean.parseBoolean(s)), pieces(s.split(":")),
                pieces(s.split("[,;]+"))));
        }
        out.flush();
    }
}
"""

PIECES = [
    "0", "1", "7", "8", "9", "00", "01", "08", "0x", "0X", "#", "+", "-", " ", "\t", "_",
    "a", "f", "F", "g", "z", "Z", "e", "x", ".", "true", "TRUE", "\u0663", "\uff13",
    "\uff26", "\uff5a", "\U0001d7d1", "\u00b2", "\u0130", "2147483647", "2147483648",
    "9223372036854775807", "9223372036854775808", "7fffffff", "80000000", "ffffffff",
    "7fffffffffffffff", "8000000000000000", "1y2p0ij32e8e7", ":", "::", ",", ";", "a=1",
]  # fmt: skip


def _corpus(n: int) -> list[str]:
    rng = random.Random(23)
    out = [text for text, _, _ in CASES] + PIECES
    for _ in range(n):
        out.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4))))
        if rng.random() < 0.3:
            out.append(
                rng.choice(["", "-", "+"])
                + rng.choice(["", "0x", "#", "0"])
                + str(rng.choice([2**31, 2**32, 2**63, 2**64]) + rng.randint(-2, 1))
            )
    return out


def _ours(s: str) -> str:
    def show(v: int | None) -> str:
        return "NFE" if v is None else str(v)

    return " ".join(
        [
            show(J.parse_int(s)),
            show(J.parse_long(s)),
            show(J.parse_int(s, 16)),
            show(J.parse_long(s, 36)),
            show(J.decode_int(s)),
            show(J.decode_long(s)),
            "true" if J.parse_boolean(s) else "false",
            pieces(J.java_split(s, ":")),
            pieces(J.java_split(s, PAIRS)),
        ]
    )


PAIRS = re.compile(r"[,;]+")


def pieces(parts: list[str]) -> str:
    return ",".join([str(len(parts)), *(p.encode("utf-8").hex() for p in parts)])


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK (java)")
def test_every_answer_is_java_s(tmp_path: Path) -> None:
    src = tmp_path / "JavaLangOracle.java"
    src.write_text(ORACLE)
    corpus = _corpus(3000)
    stdin = "".join(s.encode("utf-8").hex() + "\n" for s in corpus)
    done = subprocess.run(
        ["java", str(src)], input=stdin, capture_output=True, text=True, timeout=120, check=True
    )
    answers = done.stdout.splitlines()
    assert len(answers) == len(corpus)
    wrong = [(s, a, _ours(s)) for s, a in zip(corpus, answers, strict=True) if a != _ours(s)]
    assert not wrong, wrong[:10]
