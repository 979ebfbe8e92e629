// make_tok_corpus.mjs - writes the tokenizer test corpus: one JSON string per
// line, the cases tests/gates/30-tokenizer.sh runs through the oracle and
// the C tokenizer. Deterministic (seeded), so a failure names a line that
// means the same thing on every machine.
//
//   node tools/make_tok_corpus.mjs [--small] > corpus.jsonl
//
// --small leaves out the long runs, the long texts and the code point sweep
// (for checking a small vocabulary, whose BPE makes the oracle slow on
// long pieces).
//
// Sections: hand-written text in many scripts, code and data formats;
// contractions in every case; numbers; every kind of whitespace; special-
// token text; emoji and combining sequences; runs around the 25,000-
// character limit and texts over the 400,000-character chunk size; every
// code point in a few contexts; and seeded random mixtures of all of these.
import process from "node:process";

const small = process.argv.includes("--small");

const cases = [];
const add = (...texts) => {
    for (const t of texts) cases.push(t);
};

// --- Hand-written text -------------------------------------------------
const PROSE = [
    "The capital of France is",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! The Quick Brown Fox?",
    "Hello, world! It's a beautiful day — isn't it? “Quoted” and ‘single’ and «guillemets».",
    "e.g. i.e. etc. U.S.A. Mr. O'Neil's dog; Ph.D.; 3:45 p.m.; naïve café résumé coöperate",
    "ALLCAPS words, CamelCase, camelCase, snake_case, kebab-case, SCREAMING_SNAKE, McDonald's",
    "中华人民共和国的首都是北京。今天天气很好，我们去公园散步吧！",
    "机器学习（Machine Learning）是人工智能的一个分支，GPT-4和Kimi都是大型语言模型。",
    "日本語の文章です。ひらがな、カタカナ、漢字が混ざっています。東京タワーは333メートル。",
    "ｶﾀｶﾅ半角とカタカナ全角、ＡＢＣ全角英字、１２３全角数字。",
    "한국어 문장입니다. 서울은 대한민국의 수도입니다. 안녕하세요!",
    "Москва — столица России. Привет, мир! ЁЛКИ-ПАЛКИ, ёжик.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας. ΚΑΛΗΜΕΡΑ! ς σ Σ ΐ ΰ",
    "القاهرة هي عاصمة مصر. مرحبا بالعالم! ١٢٣٤٥٦٧٨٩٠ وَالسَّلَامُ عَلَيْكُمْ",
    "ירושלים היא בירת ישראל. שָׁלוֹם עוֹלָם! 2024",
    "नई दिल्ली भारत की राजधानी है। नमस्ते दुनिया! ०१२३४५६७८९ क्षत्रिय",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย สวัสดีครับ ๑๒๓",
    "Tiếng Việt có dấu: Hà Nội là thủ đô của Việt Nam. Đường phố đông đúc.",
    "İstanbul'da ılık bir gün. IĞDIR ŞİŞLİ ÇÖĞÜŞ ığdır",
    "Straße STRASSE ẞ ß Fußgängerübergänge Ärger Öl Übel",
    "Ǆemal ǅemal ǆemal ᾈ ᾀ Σίσυφος ΣΊΣΥΦΟΣ",
    "ქართული ენა ᲥᲐᲠᲗᲣᲚᲘ Հայերեն լեզու ᎠᏍᎦᏯ ꭰꮝꭶꮿ",
    "Монгол хэл ᠮᠣᠩᠭᠣᠯ བོད་ཡིག ግዕዝ தமிழ் বাংলা ខ្មែរ ພາສາລາວ ဗမာ",
    "ʰʲʷ ˈpʰɒnɪks ꜰᴀᴋᴇ sᴍᴀʟʟ ᴄᴀᴘs ſ ﬁ ﬂ ﬀ Ⅻ ⅻ ½ ¾ ² ³",
    "Mathematical: ∀x∈ℝ, ∃y: x²+y²≤1 ⇒ ∫₀¹ f(x)dx ≈ 𝑓(𝑥) 𝔄𝔅ℭ 𝟘𝟙𝟚",
];
add(...PROSE);

const CODE = [
    "#include <stdio.h>\n\nint main(void)\n{\n    printf(\"hello, %s!\\n\", \"world\");\n    return 0;\n}\n",
    "def fib(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint([fib(i) for i in range(10)])\n",
    "const sum = (xs) => xs.reduce((a, b) => a + b, 0);\nexport default async function main() {\n\tawait fetch(`/api/v1/items?limit=${n}`);\n}\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"héllo\")\n}\n",
    "SELECT u.id, COUNT(*) AS n FROM users u LEFT JOIN orders o ON o.user_id = u.id WHERE u.created_at >= '2024-01-01' GROUP BY u.id HAVING n > 3;",
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Test &amp; more</title></head>\n<body><p class='x'>Hi&nbsp;there</p></body>\n</html>\n",
    "#!/bin/sh\nset -eu\nfor f in *.txt; do\n  [ -f \"$f\" ] && wc -l \"$f\" | awk '{print $1}' >> out.log 2>&1\ndone\n",
    "\\documentclass{article}\n\\begin{document}\n$$\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}$$\n\\end{document}\n",
    "main :: IO ()\nmain = mapM_ print $ takeWhile (< 100) $ filter even [x^2 | x <- [1..]]\n",
    "    \n\t\tif (x) {\r\n\t\t\treturn;\r\n\t\t}\r\n",
    "{\"name\": \"k3\", \"version\": \"1.0.0\", \"nested\": {\"arr\": [1, 2.5, -3e10, true, false, null], \"s\": \"a\\\"b\\\\c\\u00e9\"}}",
    "[{\"id\":1,\"tags\":[\"a\",\"b\"]},{\"id\":2,\"tags\":[]}]",
    "https://example.com/path/to/page?query=value&other=123#fragment http://localhost:8080/api/v2/users/42 ftp://files.example.org/pub/file.tar.gz",
    "mailto:someone@example.com user.name+tag@sub.domain.co.uk C:\\Users\\Name\\Documents\\file.txt /usr/local/bin/python3",
    "| Column A | Column B |\n|----------|---------:|\n| **bold** | `code`   |\n| _it_     | [link](http://x.y) |\n",
    "SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0Lg== 0xDEADBEEF 0b101010 0o777 #ff00aa rgba(0,0,0,0.5) 550e8400-e29b-41d4-a716-446655440000",
    "a += b; c -= d; e *= f; g /= h; i %= j; k **= 2; l //= 3; m <<= 1; n >>= 2; o &&= p; q ||= r; s ??= t;",
    "!!!???...,,,;;;:::---___+++===***&&&|||~~~```'''\"\"\"<<<>>>///\\\\\\@@@###$$$%%%^^^",
];
add(...CODE);

// --- Contractions: every suffix in every case, after every kind of word --
const SUFFIXES = ["s", "t", "re", "ve", "m", "ll", "d"];
const variants = (s) => {
    const out = new Set([s, s.toUpperCase()]);
    if (s.length === 2) out.add(s[0].toUpperCase() + s[1]).add(s[0] + s[1].toUpperCase());
    return [...out];
};
const suffixes = SUFFIXES.flatMap(variants).concat(["ſ", "ſt", "Ｓ", "K", "k", "st", "ST", "res", "lll", "x", "", "'s"]);
const stems = ["don", "I", " I", "we", "SHE", "It", "Ǆ", "ǅ", "ʰ", "x\u0303", "\u0301", "1", "12345", " ", ".", "中", "ا", "Я", "я", " they", " THEY", "\n"];
for (const stem of stems)
    for (const sfx of suffixes)
        for (const apos of ["'", "’"]) add(`${stem}${apos}${sfx}`, `${stem}${apos}${sfx} next`);
add("I'm, you're, he's, she'd, we'll, they've, it'd've, y'all'd've, 'tis, 'twas, o'clock, rock'n'roll");
add("I'M YOU'RE HE'S SHE'D WE'LL THEY'VE IT'S DON'T CAN'T WON'T");
add("'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'ſ ''s '''s");
add("don't DON'T I'ſ We'LL you'RE It'Ll"); // " I'" is a token: a missed 'ſ fold shows
// UPPER* giving back characters until LOWER+ can start (Lm, Lo and marks are
// in both classes): "E\u0301" then "COLE", not "E\u0301COLE".
add("E\u0301COLE NORMALE SUPE\u0301RIEURE", "ABʰCD XYकZ ÀB\u0300CD ǅǄǅa", "ÉCOLE Ǆa ǅa Ǉǈǉ", "\u0301A\u0301a");
// The gate's demo vocabulary has " Fibonacci" as a token BPE cannot build.
add("Fibonacci fibonacci Fibonacci's FIBONACCI  Fibonacci\n Fibonacci", " Fibonacci");

// --- Numbers ------------------------------------------------------------
for (let len = 1; len <= 40; len++) {
    const digits = Array.from({ length: len }, (_, i) => "1234567890"[i % 10]).join("");
    add(digits, `x${digits}y`, ` ${digits} `, `-${digits}.${digits}`);
}
add("1,234,567.89 3.14159e-10 -42 +7 1e100 0.000001 1_000_000 12:30:45 2024-02-29T23:59:59Z v1.2.3-rc.4");
add("٠١٢٣٤٥٦٧٨٩ ۰۱۲۳۴۵۶۷۸۹ ०१२३४५६७८९ ০১২৩৪৫৬৭৮৯ ๐๑๒๓๔๕๖๗๘๙ ０１２３４５６７８９ 𝟎𝟏𝟐𝟑 ⅠⅡⅢⅣ ①②③ ¹²³⁴ ½⅓¼ 〇一二三");
add("1st 2nd 3rd 4th 21st 100th 10x 5kg 3.5GHz 1080p 4K 128GB $19.99 €5,00 ¥1000 £3 ₹500 50% 7‰");

// --- Whitespace ---------------------------------------------------------
const SPACES = ["\t", "\n", "\v", "\f", "\r", "\r\n", " ", "\u0085", "\u00a0", "\u1680", "\u2000",
    "\u2007", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u001c", "\u001d",
    "\u001e", "\u001f", "\ufeff", "\u200b", "\u180e", "\u2060"];
for (const s of SPACES) {
    for (let n = 1; n <= 4; n++) {
        const run = s.repeat(n);
        add(run, `a${run}b`, `a${run}`, `${run}a`, `a ${run} b`, `.${run}.`, `1${run}2`, `a${run} b`, `a${run}\nb`);
    }
    for (const t of SPACES) add(`x${s}${t}y`, `${s}${t}`, `x ${s}${t} y`, `x${s} ${t}y`);
}
add("line one\nline two\r\nline three\rline four\n\n\nend\n", "  leading and trailing  ", "\n\n\n", " \n \n ", "\t\t\n\t\t", "a  \n  b", "a\n \n b");

// --- Special-token text -------------------------------------------------
const SPECIAL = ["[BOS]", "[EOS]", "<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>", "[start_header_id]",
    "[end_header_id]", "[EOT]", "<|media_begin|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>",
    "<osagent_mode>", "[UNK]", "[PAD]", "<|reserved_token_163592|>", "<|reserved_token_163839|>",
    "<|reserved_token_163700|>", "<|reserved_token_0|>", "<|reserved_token_163584|>"];
for (const s of SPECIAL) add(s, `a${s}b`, ` ${s} `, `${s}${s}`, `${s}\n`, `x ${s.slice(0, -1)}`, s.slice(1));
add("<|open|>message role=\"user\"<|sep|>Hello, who are you?<|close|>message<|sep|><|end_of_msg|>" +
    "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>",
    "<|<|sep|>|> <|sep|<|sep|>> [[BOS]] [BOS[EOS]] <|end_of_msg<|end_of_msg|>|>", "<||> <| |> [] <>",
    "text with <|end_of_msg|> inside that user typed: '<|open|>' and \"[EOS]\".");

// --- Emoji and combining sequences -----------------------------------------
add("👨‍👩‍👧‍👦 👩🏽‍💻 🧑🏿‍🤝‍🧑🏻 🏳️‍🌈 🏴‍☠️ ❤️ ❤︎ 👍🏽👍🏿 1️⃣ #️⃣ *️⃣",
    "🇫🇷🇯🇵🇺🇸🇨🇳🇰🇷 🇦 🏴󠁧󠁢󠁳󠁣󠁴󠁿 🏴󠁧󠁢󠁥󠁮󠁧󠁿", "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇 emoji😀in😀text",
    "e\u0301 a\u0300\u0301\u0302\u0303 \u0301leading mark 1\u0301 .\u0301 中\u0301 Z\u0336\u0337a\u0335\u0334l\u0338g\u0334o\u0335",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af", "क्ष त्र ज्ञ श्र ि ॆ ा", "\u0e01\u0e34\u0e4a \u0e4a\u0e01");
add("A\u030a\u0328 \u0041\u030A vs \u00c5 vs \u212b", "ﬁnance ﬂow Ǳ ǲ ǳ ᾼ ῌ ῼ");

// --- Long runs around the 25,000-character limit and the 400,000 chunk ---
const WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but " +
    "have an they you were her she there would their we him been has when who will no more if out so said what " +
    "up its about into than them can only other time new some could these two may first then do any like my " +
    "now over such our man me even most made after also did many").split(" ");

function addLongCases() {
    // tiktoken's BPE is quadratic in the piece length, so the oracle pays
    // about a second per 25,000-byte piece: one case per unit and limit.
    const runOf = (unit, chars) => unit.repeat(Math.ceil(chars / Array.from(unit).length));
    add(runOf(" ", 25000), runOf(" ", 25001), `x ${runOf(" ", 50001)} y`, runOf("a", 25000), runOf("a", 25001),
        runOf(".", 25001), runOf("\n", 25001), runOf("\r\n", 25001), runOf("\u001f", 25001),
        runOf("e\u0301", 25001), runOf("1", 50001), runOf("é", 25001), `x ${runOf("A", 25001)}'s y`);
    add(" ".repeat(25000) + "word" + " ".repeat(25001) + "\u001c".repeat(25000) + "x");
    // U+001C..U+001F are str.isspace() but not White_Space: the run rule
    // counts them as spaces (so these runs are cut, inside the letters or
    // the spaces), the pattern as symbols.
    add("\u001f".repeat(20003) + "a".repeat(10000), "\u001c".repeat(20003) + " ".repeat(10000) + "x");
    add("ab ".repeat(9000) + "a".repeat(24990) + "<|end_of_msg|>" + "b".repeat(20)); // special cut by the run rule

    const parts = [];
    for (let n = 0, i = 0; n < 420000; i++) {
        const w = WORDS[(i * 7919 + 13) % WORDS.length] + (i % 17 === 0 ? ".\n" : i % 5 === 0 ? ", " : " ");
        parts.push(w);
        n += w.length;
    }
    const big = parts.join("");
    add(big);
    add(big.slice(0, 399995) + "<|end_of_msg|>" + big.slice(399995)); // special across the 400,000 cut
    add("测试中文文本，".repeat(70000)); // 490,000 characters, three bytes each
    add("😀a".repeat(210000)); // 420,000 characters, half of them astral
}

// --- Every code point in a few contexts -------------------------------
// Each case covers 512 code points; each appears between letters, after a
// space, before digits and before a contraction. Planes 0-3 and 14 in full;
// of the unassigned and private-use planes, one block in sixteen.
// (tools/check_unicode_tables.mjs checks every code point's classes.)
function addCodePointSweep() {
    for (let base = 0; base < 0x110000; base += 512) {
        const plane = base >> 16;
        if (plane > 3 && plane !== 14 && (base >> 9) % 16 !== 0) continue;
        const parts = [];
        for (let c = base; c < base + 512; c++) {
            if (c >= 0xd800 && c <= 0xdfff) continue;
            const ch = String.fromCodePoint(c);
            parts.push(`a${ch}A${ch}b ${ch}1${ch}'s${ch}\n`);
        }
        if (parts.length) add(parts.join(""));
    }
}

if (!small) {
    addLongCases();
    addCodePointSweep();
}

// --- Seeded random mixtures -----------------------------------------------
// mulberry32: small, fast, and the same on every machine.
function rng(seed) {
    return () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = seed;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
const rand = rng(20240229);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const FRAGMENTS = [
    ...PROSE.flatMap((p) => p.split(/(?<= )/u)), ...CODE.flatMap((c) => c.split(/(?<=[ \n])/u)),
    ...SPACES, ...SPECIAL, ...WORDS.map((w) => " " + w), "'s", "'T", "'ll", "'ſ", "’re",
    "\u0301", "\u0308", "ʰ", "ǅ", "Ⅻ", "½", "0", "42", "1234", "😀", "🇫🇷", "👨‍👩‍👧", "\u200d", "\ufe0f",
];
// Code point ranges to draw single characters from (no surrogates).
const RANGES = [[0x20, 0x7e], [0x00, 0x1f], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x52f], [0x590, 0x6ff],
    [0x900, 0xdff], [0xe00, 0xeff], [0x1100, 0x11ff], [0x1e00, 0x1fff], [0x2000, 0x206f], [0x2100, 0x2bff],
    [0x3000, 0x30ff], [0x3400, 0x4dbf], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0xe000, 0xe0ff], [0xf900, 0xffff],
    [0x10000, 0x1ffff], [0x20000, 0x3134f], [0xe0000, 0xe01ef], [0x10fff0, 0x10ffff]];
const randomChar = () => {
    const [lo, hi] = pick(RANGES);
    const c = lo + Math.floor(rand() * (hi - lo + 1));
    return String.fromCodePoint(c >= 0xd800 && c <= 0xdfff ? 0xfffd : c);
};
for (let i = 0; i < 3000; i++) {
    const n = 1 + Math.floor(rand() * (i % 10 === 0 ? 400 : 40));
    let s = "";
    for (let k = 0; k < n; k++) {
        const r = rand();
        s += r < 0.55 ? pick(FRAGMENTS) : r < 0.85 ? randomChar() : pick(FRAGMENTS).repeat(1 + Math.floor(rand() * 4));
    }
    add(s);
}

add(""); // the empty text
for (const c of cases) process.stdout.write(JSON.stringify(c) + "\n");
