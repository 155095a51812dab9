// The strings that conveyor's byte-level BPE must encode exactly as Hugging
// Face does: hand-written samples, then combinations of fragments and random
// character runs drawn with a fixed seed, so every run produces the same list.
//
// Two characters are left out on purpose: U+0085 (NEXT LINE) and U+FEFF (BOM).
// JavaScript's \s, which the reference (transformers.js) uses, differs there
// from Hugging Face's Rust tokenizers and llama.cpp (Unicode White_Space: U+0085
// yes, U+FEFF no), and conveyor follows the latter. Every character is from
// Unicode 14.0 or older, so the reference's newer Unicode tables and conveyor's
// ICU 72 (Unicode 15.0) classify them alike.

// mulberry32: a small deterministic generator.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const samples = [
  // English, contractions in every case
  "Hello world", "Hello, world!", " leading space", "trailing space ", "  two leading",
  "I'm here; you're there; they've gone; we'll see; he'd know; it's fine; don't.",
  "I'M HERE'S YOU'RE THEY'VE WE'LL HE'D IT'S DON'T", "i'M wE'Ll tHeY'vE", "'s 't 're",
  "rock 'n' roll", "O'Neil's dog's bone", "''quoted''", "can't won't shan't y'all",
  "The quick brown fox jumps over the lazy dog.", "ALL CAPS SENTENCE WITH NUMBERS 123",
  // numbers
  "0", "7", "42", "123", "1234", "12345", "123456", "1234567890",
  "3.14159265358979323846264338327950288419716939937510",
  "1,000,000 and 1.000.000 and 1 000 000", "-17 +23 1e-9 6.022e23 0x1F 0b1010 0o777",
  "Version 2.0.1-rc3", "2024-01-02T03:04:05Z", "+1 (555) 010-9999", "$1,234.56 €99,99 ¥1000 £5",
  "99999999999999999999999999999999999999999999999999", "a1b22c333d4444e55555",
  "١٢٣٤٥ ٦٧٨٩٠", "१२३४५६७८९०", "１２３４５", "Ⅻ ⅻ ½ ¾ ⅓ ² ³ ₁₂",
  // whitespace
  "a  b   c    d", "a\tb\t\tc", "line1\nline2\n\nline4", "crlf\r\nline\r\n", "\n\n\n",
  "   ", "\t", " \n ", "x \n\n  y", "end.\n\n", "trailing tabs\t\t", "mixed \t \n \r\n\t end",
  "\u00a0non-breaking\u00a0space", "ideographic\u3000space", "thin\u2009space\u2002en\u2003em",
  "form\ffeed\vvertical", "para\u2029sep\u2028line", "       indented with many spaces",
  // code
  "def add(a, b):\n    return a + b\n", "for i in range(10):\n\tprint(i ** 2)",
  "int main(int argc, char** argv) {\n  std::cout << \"hi\\n\";\n  return 0;\n}",
  "const f = (x) => x?.y ?? [1, 2, 3].map(n => n * 2);", "let mut v: Vec<u8> = Vec::new(); v.push(0xff);",
  "fn main() { println!(\"{}\", 1 + 2); }", "func (s *Server) Run() error { return nil }",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
  "<div class=\"box\"><a href=\"/x?y=1&z=2\">link</a></div>", "#!/bin/sh\nset -eu\necho \"$HOME\" | tr a-z A-Z",
  "if (x != y && !z) { x += 1; } else { x -= 1; }", "a[i][j] = b->c.d(e, f)->g;",
  "#include <vector>\ntemplate <typename T> T max(T a, T b) { return a > b ? a : b; }",
  "    if err != nil {\n        return fmt.Errorf(\"wrap: %w\", err)\n    }",
  "x=1;y=2;z=x+y", "foo_bar_baz = FooBarBaz()", "camelCaseIdentifier and snake_case_name",
  "@decorator\nclass A(B, metaclass=M): pass", "printf(\"%5.2f%%\\n\", 99.5);",
  // URLs, JSON, markdown
  "https://example.com/path/to/page?query=1&lang=en#section-2",
  "mailto:someone@example.org ftp://ftp.example.net/pub/file.tar.gz",
  "{\"name\": \"Alice\", \"age\": 30, \"tags\": [\"a\", \"b\"], \"ok\": true, \"x\": null}",
  "[{\"id\":1},{\"id\":2,\"nested\":{\"k\":\"v\"}}]",
  "# Title\n\n## Subtitle\n\n- item one\n- item **two**\n1. first\n\n```python\nprint('x')\n```\n",
  "| a | b |\n|---|---|\n| 1 | 2 |", "> quoted text\n>> nested", "*emphasis* and _underline_ and `code`",
  // scripts
  "你好，世界！今天天气很好。", "我爱北京天安门", "日本語のテキストです。カタカナとひらがな。",
  "한국어 텍스트입니다. 안녕하세요!", "Привет, мир! Как дела?", "Ελληνικά: Γειά σου Κόσμε",
  "مرحبا بالعالم! كيف حالك؟", "שלום עולם! מה שלומך?", "नमस्ते दुनिया! आप कैसे हैं?",
  "হ্যালো বিশ্ব", "வணக்கம் உலகம்", "నమస్కారం ప్రపంచం", "ಹಲೋ ವರ್ಲ್ಡ್", "ഹലോ വേൾഡ്",
  "ਸਤ ਸ੍ਰੀ ਅਕਾਲ", "નમસ્તે વિશ્વ", "ສະບາຍດີ", "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง",
  "မင်္ဂလာပါ", "សួស្តី​ពិភពលោក", "გამარჯობა მსოფლიო", "Բարեւ աշխարհ", "ሰላም ለዓለም",
  "Xin chào thế giới", "Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ", "Zażółć gęślą jaźń", "Příliš žluťoučký kůň",
  "Ça va? Déjà vu, naïve café, coöperate", "Straße Grüße Äpfel", "Ñandú español ¿qué? ¡sí!",
  "Türkçe: İstanbul ıı İİ", "Íslenska: þ ð æ", "Ελληνικά με τόνους: ά έ ή ί ό ύ ώ ΐ ΰ",
  // combining marks, decomposed forms (Qwen normalizes to NFC)
  "e\u0301 a\u0300 o\u0308 n\u0303", "Cafe\u0301 re\u0301sume\u0301", "A\u030a\u0301",
  "\u1100\u1161\u11a8 \u1112\u1161\u11ab", "x\u0327\u0301\u0302", "\u0915\u094d\u0937",
  "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f",
  // emoji
  "I love 🦙 and 🐍!", "👍👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 🏴‍☠️", "❤️ ❤ ♥️",
  "🇺🇸🇯🇵🇩🇪", "1️⃣ #️⃣ *️⃣", "😀😃😄😁😆😅😂🤣", "🧑🏽‍💻 coding", "☕️ coffee ☕",
  // special tokens written in text
  "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
  "text <|eot_id|> more <|end_of_text|>", "<|endoftext|>", "<think>\nreasoning\n</think>\n\nanswer",
  "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "<|im_start|><|im_start|>",
  "<|im_start", "im_start|>", "<|reserved_special_token_5|>", "<|fim_prefix|>def f(<|fim_suffix|>)<|fim_middle|>",
  "< |im_start| >", "<<|im_end|>>", "<s> </s> <unk>", "<|python_tag|>", "a<|eom_id|>b",
];

// Fragments to combine.
const fragments = [
  "the", "The", " and", "of", "to", "in", "is", "that", "for", "it", "with", "as", "was",
  "hello", "world", "token", "tokenizer", "Llama", "Qwen", "model", "GPU", "API", "JSON", "HTTP",
  "can't", "I'm", "we'll", "THEY'RE", "he'D", "'s", "'", "\"", "(", ")", "[", "]", "{", "}",
  ",", ".", "!", "?", ";", ":", "-", "--", "...", "…", "—", "–", "/", "\\", "|", "@", "#",
  "$", "%", "^", "&", "*", "+", "=", "<", ">", "~", "`", "_", "__init__", "->", "=>", "::", "!=",
  "0", "1", "12", "123", "1234", "98765", "3.14", "1e10", "2024", "٣", "१", "５",
  "你好", "世界", "中文", "日本", "ひらがな", "カタカナ", "한국", "привет", "мир", "γειά",
  "مرحبا", "שלום", "नमस्ते", "हिन्दी", "বাংলা", "தமிழ்", "ไทย", "ภาษา", "ქართ", "Ἀθῆναι",
  "é", "ñ", "ü", "ß", "ø", "æ", "œ", "ı", "İ", "ǅ", "ﬁ", "Ⅻ", "½", "²",
  "🦙", "🐍", "👍🏽", "👩‍💻", "🇫🇷", "❤️", "✨", "🤖", "😂", "🏳️‍🌈",
  "<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|begin_of_text|>", "<think>", "</think>",
  "<|endoftext|>", "<|start_header_id|>", "<|end_header_id|>", "<tool_call>",
  "https://x.io/a?b=c", "user@example.com", "C:\\Program Files\\", "~/.bashrc", "#define",
  "\u00a0", "\u3000", "\u2009", "\u200b", "\u200d", "\u2060", "\u00ad",
];
const separators = ["", "", " ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", " \n", "   ", "\u3000"];

// Code point ranges for random runs (all assigned in Unicode 14.0 or earlier).
const ranges = [
  [0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], [0xa1, 0xff], [0x100, 0x17f], [0x370, 0x3ff],
  [0x400, 0x4ff], [0x5d0, 0x5ea], [0x591, 0x5c7], [0x620, 0x64a], [0x64b, 0x65f], [0x660, 0x669],
  [0x905, 0x939], [0x93e, 0x94d], [0x966, 0x96f], [0x995, 0x9b9], [0x9be, 0x9cc], [0xb95, 0xbb9],
  [0xbbe, 0xbcd], [0xe01, 0xe30], [0xe31, 0xe3a], [0xe40, 0xe4e], [0xe50, 0xe59], [0x10d0, 0x10fa],
  [0x1100, 0x1112], [0x1161, 0x1175], [0x11a8, 0x11c2], [0x1e00, 0x1eff], [0x2000, 0x200a],
  [0x2010, 0x2027], [0x2030, 0x205e], [0x2070, 0x209c], [0x20a0, 0x20bf], [0x2100, 0x214f],
  [0x2150, 0x218b], [0x2190, 0x21ff], [0x2200, 0x22ff], [0x2460, 0x24ff], [0x2500, 0x257f],
  [0x2600, 0x26ff], [0x3001, 0x303f], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x4fff],
  [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xff01, 0xff5e], [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f],
  [0x1f680, 0x1f6c5], [0x1f3fb, 0x1f3ff], [0x1d400, 0x1d4ff], [0x10400, 0x1044f], [0x20000, 0x2a6d6],
  [0x300, 0x36f], [0x1ab0, 0x1abe],
];
const whitespace = [" ", " ", "\t", "\n", "\r\n", "\r", "\v", "\f", "\u00a0", "\u2028", "\u3000", "\u2003"];

function pick(r, list) { return list[Math.floor(r() * list.length)]; }

function randomRun(r) {
  const [lo, hi] = pick(r, ranges);
  let s = "";
  const n = 1 + Math.floor(r() * 12);
  for (let i = 0; i < n; ++i) {
    if (r() < 0.15) s += pick(r, whitespace);
    else s += String.fromCodePoint(lo + Math.floor(r() * (hi - lo + 1)));
  }
  return s;
}

export function corpus() {
  const r = rng(20240917);
  const out = [...samples];
  for (let i = 0; i < 700; ++i) {
    const n = 1 + Math.floor(r() * 8);
    let s = "";
    for (let k = 0; k < n; ++k) s += (k ? pick(r, separators) : "") + pick(r, fragments);
    if (r() < 0.2) s = pick(r, separators) + s;
    if (r() < 0.2) s += pick(r, separators);
    out.push(s);
  }
  for (let i = 0; i < 300; ++i) {
    const n = 1 + Math.floor(r() * 5);
    let s = "";
    for (let k = 0; k < n; ++k) s += (k && r() < 0.5 ? pick(r, separators) : "") + randomRun(r);
    out.push(s);
  }
  // Long runs: digits, spaces, newlines, repeated words and characters.
  for (const n of [5, 50, 333, 1000]) {
    out.push("7".repeat(n), " ".repeat(n) + "x", "\n".repeat(n), "ab".repeat(n), "é".repeat(n));
    out.push("😀".repeat(n), "word ".repeat(n), "\t \n".repeat(n), "0123456789".repeat(Math.ceil(n / 10)));
  }
  // A longer mixed document.
  out.push(out.slice(0, 200).join(" "));
  return out;
}
