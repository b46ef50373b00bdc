"""``Double.parseDouble`` (:func:`trizk.jute.javalang.parse_double`): the cases written out, then
the installed JDK as the oracle for them and a few thousand seeded random texts (every answer
compared bit for bit: ``Double.doubleToRawLongBits``, or NumberFormatException)."""

from __future__ import annotations

import math
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from trizk.jute import javalang as J

CASES: list[tuple[str, float | None]] = [
    ("0.33", 0.33),
    (" 0.5\t", 0.5),  # String.trim
    ("-1", -1.0),
    ("1e-1", 0.1),
    ("1E+2", 100.0),
    (".5", 0.5),
    ("5.", 5.0),
    ("0.5d", 0.5),
    ("2F", 2.0),
    ("-Infinity", -math.inf),
    ("+Infinity", math.inf),
    ("0x1.8p1", 3.0),
    ("-0x1P-2", -0.25),
    ("1e400", math.inf),
    ("1e-400", 0.0),
    ("", None),
    (".", None),
    ("1e", None),
    ("1_0", None),
    ("inf", None),
    ("nan", None),
    ("infinity", None),
    ("0x1.8", None),  # a hexadecimal literal needs its binary exponent
    ("1.5 x", None),
    ("NaNd", None),
    ("\u0663", None),  # ASCII digits only
]


def test_cases() -> None:
    for text, want in CASES:
        assert J.parse_double(text) == want, text
    assert math.isnan(J.parse_double("NaN") or 0.0)
    assert math.isnan(J.parse_double("-NaN") or 0.0)
    assert J.parse_double(None) is None


ORACLE = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;

public class DoubleOracle {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            byte[] raw = new byte[line.length() / 2];
            for (int i = 0; i < raw.length; i++) {
                raw[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            }
            String s = new String(raw, StandardCharsets.UTF_8);
            try {
                out.println(Long.toHexString(Double.doubleToRawLongBits(Double.parseDouble(s))));
            } catch (NumberFormatException e) {
                out.println("NFE");
            }
        }
        out.flush();
    }
}
"""

PIECES = [
    "0", "1", "9", "00", ".", "..", "e", "E", "e-", "E+", "5", "+", "-", " ", "\t", "\n", "_",
    "d", "D", "f", "F", "x", "0x", "0X", "p", "P", "p-", "a", "A", "NaN", "Infinity", "nan",
    "1e308", "1e309", "4.9e-324", "2.5e-324", "1.7976931348623157", "123456789012345678901",
    "\u0663", "\u00a0", "\u2007",
]  # fmt: skip


def _corpus(n: int) -> list[str]:
    rng = random.Random(29)
    out = [text for text, _ in CASES] + PIECES + ["-NaN", "NaN"]
    for _ in range(n):
        out.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 5))))
    return out


def _ours(s: str) -> str:
    v = J.parse_double(s)
    return "NFE" if v is None else f"{struct.unpack('>Q', struct.pack('>d', v))[0]:x}"


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK (java)")
def test_every_answer_is_java_s(tmp_path: Path) -> None:
    src = tmp_path / "DoubleOracle.java"
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
