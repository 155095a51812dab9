// The language, piece by piece. Every expected string below is what
// Python's jinja2 3.1 renders in transformers' environment (the generator
// that wrote them ran tests/template/render_reference.py's environment on
// each template with the context below); a "fails" expectation is a case
// where Python raises.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <thread>

#include <boost/json.hpp>

#include "template/jinja/jinja.hpp"

namespace conveyor::jinja {
namespace {

namespace json = boost::json;

json::object context() {
  return json::parse(R"({"d": {"a": 1, "items": [1, 2]}, "l": [3, 1, 2], "s": "Hello", "u": "héllo wörld",
                         "n": null, "f": 2.5,
                         "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})")
      .as_object();
}

RenderOptions fixed_clock() {
  RenderOptions options;
  options.now = std::chrono::system_clock::from_time_t(1721995200);
  return options;
}

Expected<Rendered> try_render(std::string_view source) {
  auto t = Template::parse(source);
  if (!t) return t.error();
  return t->render(context(), {}, fixed_clock());
}

std::string render(std::string_view source) {
  auto r = try_render(source);
  if (!r) {
    ADD_FAILURE() << source << "\n  failed: " << r.error().message;
    return {};
  }
  return r->text;
}

bool fails(std::string_view source) { return !try_render(source).has_value(); }

TEST(JinjaWhitespace, TrimBlocksDropsTheNewlineAfterATag) {
  EXPECT_EQ(render(R"x(a
{% if true %}
b
{% endif %}
c)x"), R"x(a
b
c)x");
}

TEST(JinjaWhitespace, LstripBlocksDropsIndentBeforeATag) {
  EXPECT_EQ(render(R"x(a
    {% if true %}
  x
    {% endif %}
b)x"), R"x(a
  x
b)x");
}

TEST(JinjaWhitespace, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(render(R"x(x  

  {{- 1 -}}  

  y)x"), "x1y");
}

TEST(JinjaWhitespace, MinusOnBlocksAndComments) {
  EXPECT_EQ(render(R"x(  {{ 1 }}
  {%- if 1 %} y {% endif -%}  
 z {#- c -#}   w)x"), "  1 y zw");
}

TEST(JinjaWhitespace, PlusKeepsWhatTrimAndLstripWouldDrop) {
  EXPECT_EQ(render(R"x(a
  {%+ if 1 %}b{% endif +%}
c)x"), R"x(a
  b
c)x");
}

TEST(JinjaWhitespace, CommentsVanishAndTrimTheirNewline) {
  EXPECT_EQ(render(R"x({# c #}
  {# d #}  
q)x"), R"x(  
q)x");
}

TEST(JinjaWhitespace, VariableTagsAreNotTrimmed) {
  EXPECT_EQ(render(R"x({{ 1 }}
  {{ 2 }}
)x"), R"x(1
  2)x");
}

TEST(JinjaWhitespace, OneTrailingNewlineIsDropped) {
  EXPECT_EQ(render(R"x(x

)x"), R"x(x
)x");
}

TEST(JinjaWhitespace, WindowsNewlinesBecomeNewlines) {
  EXPECT_EQ(render("a\x0d""\n{% if 1 %}\x0d""\nb\x0d""\n{% endif %}\x0d""\nc"), R"x(a
b
c)x");
}

TEST(JinjaWhitespace, RawBlocksAreText) {
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}!"), "{{ x }}{% if %}!");
}

TEST(JinjaWhitespace, BlockSetKeepsTrimmedLines) {
  EXPECT_EQ(render(R"x({% set text %}
line1
  {% if true %}
  line2
  {% endif %}
{% endset %}[{{ text }}])x"), R"x([line1
  line2
])x");
}

TEST(JinjaWhitespace, IndentedLoopsWithMinus) {
  EXPECT_EQ(render(R"x(   {%- for x in [1] %}
   {{ x }}
   {% endfor %}|{% for x in [1, 2] -%}
    {{ x }}
{%- endfor %})x"), R"x(   1
|12)x");
}

TEST(JinjaLiterals, PythonRenderingOfScalars) {
  EXPECT_EQ(render("{{ true }} {{ False }} {{ none }} {{ None }} {{ 1 }} {{ 1.0 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.0001 }} {{ -0.0 }} {{ 1/3 }}"), "True False None None 1 1.0 1e+16 1e-05 0.0001 -0.0 0.3333333333333333");
}

TEST(JinjaLiterals, ContainersPrintAsPythonRepr) {
  EXPECT_EQ(render(R"x({{ [1, "a", none, true, 1.5, {"k": "v"}] }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ {} }})x"), "[1, 'a', None, True, 1.5, {'k': 'v'}] (1,) (1, 2) () {}");
}

TEST(JinjaLiterals, StringReprPicksItsQuotes) {
  EXPECT_EQ(render(R"x({{ ["it's", 'a"b', "x\ny", "tab\t", "back\\slash", "\u00e9", "\u3000"] }})x"), R"x(["it's", 'a"b', 'x\ny', 'tab\t', 'back\\slash', 'é', '\u3000'])x");
}

TEST(JinjaLiterals, StringEscapes) {
  EXPECT_EQ(render(R"x({{ "\x41\u00e9\101\q\"\'" }})x"), R"x(AéA\q"')x");
}

TEST(JinjaLiterals, NumberLiterals) {
  EXPECT_EQ(render("{{ 0x1F }} {{ 0b11 }} {{ 0o17 }} {{ 1_000 }} {{ 1.5e3 }} {{ 1E3 }} {{ 2.50 }}"), "31 3 15 1000 1500.0 1000.0 2.5");
}

TEST(JinjaLiterals, AdjacentStringsJoin) {
  EXPECT_EQ(render(R"x({{ "a" 'b' "c" }})x"), "abc");
}

TEST(JinjaLiterals, DictLiteralKeepsOrderAndLastValue) {
  EXPECT_EQ(render(R"x({{ {"b": 1, "a": 2, "b": 3} }})x"), "{'b': 3, 'a': 2}");
}

TEST(JinjaLiterals, UndefinedPrintsNothing) {
  EXPECT_EQ(render("[{{ nothing }}][{{ d.missing }}]"), "[][]");
}

TEST(JinjaLiterals, FloatsPrintLikePython) {
  EXPECT_EQ(render("{{ 0.1 + 0.2 }} {{ 1e300 * 1e300 }} {{ 3.0 * 2 }} {{ 7 / 7 }} {{ 1e22 }} {{ 123456789.123456789 }} {{ 1.5e300|tojson }}"), "0.30000000000000004 inf 6.0 1.0 1e+22 123456789.12345679 1.5e+300");
}

TEST(JinjaExpressions, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 }} {{ 7 - 10 }} {{ 2 * 3.0 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ true + 1 }}"), "3 -3 6.0 2.5 2 -4 2 1.5 1024 0.5 2");
}

TEST(JinjaExpressions, UnaryMinusBindsTighterThanPower) {
  EXPECT_EQ(render("{{ -2 ** 2 }} {{ -(2 ** 2) }}"), "4 -4");
}

TEST(JinjaExpressions, SequenceArithmetic) {
  EXPECT_EQ(render(R"x({{ "ab" * 3 }} {{ [0] * 2 }} {{ 3 * "x" }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ "a" + "b" }})x"), "ababab [0, 0] xxx [1, 2] (1, 2) ab");
}

TEST(JinjaExpressions, TildeConcatenatesStrings) {
  EXPECT_EQ(render(R"x({{ "x" ~ 1 ~ none ~ 1.5 ~ true ~ nothing ~ [1] }})x"), "x1None1.5True[1]");
}

TEST(JinjaExpressions, ComparisonsChain) {
  EXPECT_EQ(render(R"x({{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == [1, 2] }} {{ 1 == 1.0 == true }} {{ "a" < "b" }} {{ 2 >= 2 }})x"), "True False True False True True True");
}

TEST(JinjaExpressions, InAndNotIn) {
  EXPECT_EQ(render(R"x({{ "ab" in "cabd" }} {{ 1 in l }} {{ "a" in d }} {{ 5 not in l }} {{ "x" in nothing }} {{ not 1 in l }})x"), "True True True True False False");
}

TEST(JinjaExpressions, AndOrReturnOperands) {
  EXPECT_EQ(render(R"x({{ 0 or "b" }} {{ "a" and "b" }} {{ none or [] }} {{ not none }})x"), "b b [] True");
}

TEST(JinjaExpressions, InlineIf) {
  EXPECT_EQ(render(R"x([{{ 1 if false }}] {{ 1 if true else 2 }} {{ "y" if n is none else "n" }} {{ "a" if false else "b" if true else "c" }})x"), "[] 1 y b");
}

TEST(JinjaExpressions, FiltersBindTighterThanArithmetic) {
  EXPECT_EQ(render(R"x({{ "a" ~ " b "|trim ~ "c" }} {{ 1 + [1, 2]|length }} {{ -1|abs }})x"), "abc 3 1");
}

TEST(JinjaExpressions, AttributesAndItems) {
  EXPECT_EQ(render(R"x({{ d.a }} {{ d["a"] }} {{ d["items"] }} {{ l[0] }} {{ l[-1] }} {{ l.1 }} {{ messages[1].role }} [{{ l[9] }}] [{{ s.nope }}])x"), "1 1 [1, 2] 3 2 1 assistant [] []");
}

TEST(JinjaExpressions, AttributesPreferMethodsItemsPreferKeys) {
  EXPECT_EQ(render(R"x({{ d["items"] }} {{ d.items() | list }})x"), "[1, 2] [('a', 1), ('items', [1, 2])]");
}

TEST(JinjaExpressions, Slicing) {
  EXPECT_EQ(render(R"x({{ "abc"[::-1] }} {{ u[1:3] }} {{ s[-3:] }} {{ l[::2] }} {{ l[1:] }} {{ l[:-1] }} {{ l[5:10] }} {{ (1, 2, 3)[1:] }} {{ u[::-2] }})x"), R"x(cba él llo [3, 2] [1, 2] [3, 1] [] (2, 3) drwolh)x");
}

TEST(JinjaExpressions, StringsIndexByCodePoint) {
  EXPECT_EQ(render("{{ u[1] }} {{ u | length }} {{ u | first }} {{ u | last }} {{ u | list }}"), R"x(é 11 h d ['h', 'é', 'l', 'l', 'o', ' ', 'w', 'ö', 'r', 'l', 'd'])x");
}

TEST(JinjaStatements, IfElifElse) {
  EXPECT_EQ(render("{% for x in [0, 1, 2] %}{% if x == 0 %}zero{% elif x == 1 %}one{% else %}many{% endif %} {% endfor %}"), "zero one many ");
}

TEST(JinjaStatements, ForLoopVariables) {
  EXPECT_EQ(render(R"x({% for a in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}]{{ loop.cycle("x", "y") }},{% endfor %})x"), "1032TrueFalse3[|1]x,2121FalseFalse3[3|2]y,3210FalseTrue3[1|]x,");
}

TEST(JinjaStatements, ForWithFilterAndElse) {
  EXPECT_EQ(render("{% for a in l if a > 1 %}{{ loop.index }}:{{ a }}/{{ loop.length }} {% else %}none{% endfor %}{% for a in [] %}x{% else %}empty{% endfor %}"), "1:3/2 2:2/2 empty");
}

TEST(JinjaStatements, ForUnpacksTuples) {
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, (b, c) in [(1, (2, 3))] %}{{ a }}{{ b }}{{ c }}{% endfor %}"), "a=1;items=[1, 2];123");
}

TEST(JinjaStatements, ForOverDictStringAndUndefined) {
  EXPECT_EQ(render(R"x({% for k in d %}{{ k }}{% endfor %}|{% for c in "ab" %}{{ c }}.{% endfor %}|{% for x in nothing %}x{% else %}none{% endfor %})x"), "aitems|a.b.|none");
}

TEST(JinjaStatements, BreakAndContinue) {
  EXPECT_EQ(render("{% for x in range(6) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "023");
}

TEST(JinjaStatements, SetAndTupleSet) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}{% set x = [1] + [2] %}{{ x }}"), "12(1, 2)[1, 2]");
}

TEST(JinjaStatements, BlockSetWithFilter) {
  EXPECT_EQ(render(R"x({% set x %}inner {{ 1 }}{% endset %}[{{ x }}]{% set y | upper | replace("B", "-") %}abc{% endset %}{{ y }})x"), "[inner 1]A-C");
}

TEST(JinjaStatements, FilterBlock) {
  EXPECT_EQ(render("{% filter upper %}hello {{ s }}{% endfilter %}"), "HELLO HELLO");
}

TEST(JinjaStatements, WithBlock) {
  EXPECT_EQ(render("{% set a = 5 %}{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}"), "155");
}

TEST(JinjaStatements, PrintStatement) {
  EXPECT_EQ(render(R"x({% print 1, "a" %})x"), "1a");
}

TEST(JinjaStatements, GenerationBlockRendersItsBody) {
  EXPECT_EQ(render("{% generation %}x{% set inner = 1 %}{% endgeneration %}[{{ inner }}]"), "x[]");
}

TEST(JinjaScoping, SetInsideALoopLastsOneIteration) {
  EXPECT_EQ(render("{% for i in range(3) %}{% if loop.first %}{% set x = 1 %}{% endif %}[{{ x }}]{% endfor %}[{{ x }}]"), "[1][][][]");
}

TEST(JinjaScoping, LoopsReadButDoNotWriteOuterNames) {
  EXPECT_EQ(render("{% set x = 5 %}{% for i in range(3) %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}"), "[5][5][5]5");
}

TEST(JinjaScoping, NamespacesCarryStateOutOfLoops) {
  EXPECT_EQ(render("{% set ns = namespace(x=1, found=false) %}{% for i in l %}{% set ns.x = ns.x + i %}{% if i == 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.x }} {{ ns.found }} {{ ns }}"), "7 True <Namespace {'x': 7, 'found': True}>");
}

TEST(JinjaScoping, IfDoesNotOpenAScope) {
  EXPECT_EQ(render("{% if true %}{% set y = 2 %}{% endif %}{{ y }}"), "2");
}

TEST(JinjaScoping, SetShadowsContext) {
  EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages | length }}"), "1");
}

TEST(JinjaScoping, MacrosSeeTheirDefinitionScopeNotTheCaller) {
  EXPECT_EQ(render("{% macro m() %}[{{ x }}|{{ i }}]{% endmacro %}{% set x = 1 %}{{ m() }}{% for i in range(2) %}{% set x = 5 %}{{ m() }}{% endfor %}{% set x = 2 %}{{ m() }}"), "[1|][1|][1|][2|]");
}

TEST(JinjaScoping, MacroSetsStayInside) {
  EXPECT_EQ(render("{% macro m() %}{% set y = 1 %}{{ y }}{% endmacro %}{{ m() }}[{{ y }}]"), "1[]");
}

TEST(JinjaScoping, MacrosChangeNamespaces) {
  EXPECT_EQ(render("{% set ns = namespace(c=0) %}{% macro inc() %}{% set ns.c = ns.c + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ ns.c }}"), "2");
}

TEST(JinjaScoping, NestedLoopsShadowLoop) {
  EXPECT_EQ(render("{% for i in range(2) %}{% set outer = loop %}{% for j in range(2) %}{{ outer.index }}{{ loop.index }} {% endfor %}{{ loop.index }};{% endfor %}"), "11 12 1;21 22 2;");
}

TEST(JinjaScoping, LoopVariablesEndWithTheLoop) {
  EXPECT_EQ(render("{% for i in [1] %}{% endfor %}[{{ i }}]{% set j = 9 %}{% for j in [1] %}{{ j }}{% endfor %}[{{ j }}]"), "[]1[9]");
}

TEST(JinjaScoping, MacrosDefinedInBranchesAndLoops) {
  EXPECT_EQ(render("{% if true %}{% macro m() %}M{% endmacro %}{% endif %}{{ m() }}{% for x in [1, 2] %}{% macro n() %}{{ x }}{% endmacro %}{{ n() }}{% endfor %}"), "M12");
}

TEST(JinjaMacros, DefaultsAndKeywords) {
  EXPECT_EQ(render(R"x({% macro m(a, b=a ~ "!") %}[{{ a }},{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(b=5, a=0) }}{{ m() }})x"), "[1,1!][1,3][0,5][,!]");
}

TEST(JinjaMacros, VarargsAndKwargs) {
  EXPECT_EQ(render("{% macro m(a) %}[{{ a }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ m(1, 2, k=3) }}"), "[1(2,){'k': 3}]");
}

TEST(JinjaMacros, ExtraArgumentsFailWithoutVarargs) {
  // Python: TypeError: macro 'm' takes not more than 1 argument(s)
  EXPECT_TRUE(fails("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"));
}

TEST(JinjaMacros, UnknownKeywordFails) {
  // Python: TypeError: macro 'm' takes no keyword argument 'b'
  EXPECT_TRUE(fails("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}"));
}

TEST(JinjaMacros, CallBlockPassesCaller) {
  EXPECT_EQ(render("{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}<{{ v }}>{% endcall %}"), "<1><2>");
}

TEST(JinjaMacros, MacrosSeeTemplateVariablesAndRecurse) {
  EXPECT_EQ(render(R"x({% set sep = "/" %}{% macro count(n) %}{{ n }}{% if n > 0 %}{{ sep }}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }})x"), "3/2/1/0");
}

TEST(JinjaMacros, MacroOutputIsAString) {
  EXPECT_EQ(render("{% macro m() %} x {% endmacro %}[{{ m() | trim }}] {{ m() is string }}"), "[x] True");
}

TEST(JinjaFilters, StringFilters) {
  EXPECT_EQ(render(R"x({{ "  x  "|trim }}|{{ "xxhixx"|trim("x") }}|{{ "hello world"|title }}|{{ "hELLO"|capitalize }}|{{ "x"|center(5) }}|{{ "<a>&'"|escape }}|{{ "a b c"|wordcount }}|{{ s|upper }}{{ s|lower }}|{{ u|upper }})x"), R"x(x|hi|Hello World|Hello|  x  |&lt;a&gt;&amp;&#39;|3|HELLOhello|HÉLLO WÖRLD)x");
}

TEST(JinjaFilters, ReplaceAndFormat) {
  EXPECT_EQ(render(R"x({{ "aaa"|replace("a", "b", 2) }} {{ "abc"|replace("", "-") }} {{ "%s-%05.1f-%d"|format("a", 2.25, 7) }} {{ "%(x)s"|format(x=1) }})x"), "bba -a-b-c- a-002.2-7 1");
}

TEST(JinjaFilters, ListFilters) {
  EXPECT_EQ(render(R"x({{ l|sort }} {{ l|sort(reverse=true) }} {{ l|reverse|list }} {{ l|first }} {{ l|last }} {{ l|length }} {{ l|count }} {{ l|join("-") }} {{ l|sum }} {{ l|min }} {{ l|max }} {{ l|list }})x"), "[1, 2, 3] [3, 2, 1] [2, 1, 3] 3 2 3 3 3-1-2 6 1 3 [3, 1, 2]");
}

TEST(JinjaFilters, SortIsCaseInsensitiveAndStable) {
  EXPECT_EQ(render(R"x({{ ["b", "A", "a", "B"]|sort }} {{ ["b", "A", "a"]|sort(case_sensitive=true) }} {{ [{"n": 2, "k": "x"}, {"n": 1, "k": "y"}, {"n": 2, "k": "z"}]|sort(attribute="n")|map(attribute="k")|join }})x"), "['A', 'a', 'b', 'B'] ['A', 'a', 'b'] yxz");
}

TEST(JinjaFilters, UniqueDictsortItems) {
  EXPECT_EQ(render(R"x({{ ["a", "A", "b", "a"]|unique|list }} {{ {"b": 1, "A": 2}|dictsort }} {{ {"b": 1, "a": 2}|dictsort(by="value", reverse=true) }} {{ d|items|list }})x"), "['a', 'b'] [('A', 2), ('b', 1)] [('a', 2), ('b', 1)] [('a', 1), ('items', [1, 2])]");
}

TEST(JinjaFilters, MapSelectReject) {
  EXPECT_EQ(render(R"x({{ l|map("string")|list }} {{ messages|map(attribute="role")|join(",") }} {{ [{"a": {"b": 1}}]|map(attribute="a.b")|list }} {{ [1, 2, 3, 4]|select("even")|list }} {{ [1, 0, 2]|select|list }} {{ [1, 2, 3]|reject("odd")|list }} {{ messages|selectattr("role", "equalto", "user")|list|length }} {{ [{"x": 1}, {"x": 2}]|rejectattr("x", "equalto", 1)|list }})x"), "['3', '1', '2'] user,assistant [1] [2, 4] [1, 2] [2] 1 [{'x': 2}]");
}

TEST(JinjaFilters, GeneratorsAreAlwaysTrue) {
  EXPECT_EQ(render("{% if []|select %}true{% endif %} {% if []|select|list %}{% else %}empty{% endif %}"), "true empty");
}

TEST(JinjaFilters, DefaultFilter) {
  EXPECT_EQ(render(R"x({{ nothing|default("dflt") }} {{ ""|default("e", true) }} {{ n|default("z") }} {{ nothing|d(1) }})x"), "dflt e None 1");
}

TEST(JinjaFilters, NumberFilters) {
  EXPECT_EQ(render(R"x({{ "3.7"|int }} {{ " 12 "|int }} {{ "0x1A"|int(base=16) }} {{ "abc"|int(5) }} {{ "1e3"|float }} {{ "x"|float }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.567|round(2, "floor") }} {{ 7|round(method="ceil") }} {{ -3|abs }} {{ 5|float }})x"), "3 12 26 5 1000.0 0.0 2.0 4.0 2.67 2.56 7.0 3 5.0");
}

TEST(JinjaFilters, Indent) {
  EXPECT_EQ(render(R"x({{ "a\nb\n\nc"|indent(2) }}|{{ "a\nb"|indent(2, true) }}|{{ "a\n\nb"|indent("> ", blank=true) }})x"), R"x(a
  b

  c|  a
  b|a
> 
> b)x");
}

TEST(JinjaFilters, StringAndList) {
  EXPECT_EQ(render(R"x({{ 1|string ~ none|string }} {{ "ab"|list }} {{ d|list }} {{ (1, 2)|join }})x"), "1None ['a', 'b'] ['a', 'items'] 12");
}

TEST(JinjaFilters, BatchAndAttr) {
  EXPECT_EQ(render(R"x({{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 0)|list }} {{ d|attr("a") }}|{{ d|attr("items") is defined }})x"), "[[1, 2], [3, 4], [5]] [[1, 2], [3, 0]] |True");
}

TEST(JinjaFilters, TojsonIsJsonDumpsWithoutAsciiEscapes) {
  EXPECT_EQ(render(R"x({{ messages|tojson }} {{ [1.0, 2.5, none, true, "é\n\"\u0001"]|tojson }} {{ {"b": 1, "a": [1, (2, 3)]}|tojson(sort_keys=true) }} {{ {"a": 1}|tojson(separators=(",", ":")) }} {{ "é"|tojson(ensure_ascii=true) }})x"), R"x([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}] [1.0, 2.5, null, true, "é\n\"\u0001"] {"a": [1, [2, 3]], "b": 1} {"a":1} "\u00e9")x");
}

TEST(JinjaFilters, TojsonIndent) {
  EXPECT_EQ(render(R"x({{ {"a": [1, {}, []], "b": {"c": none}}|tojson(indent=2) }})x"), R"x({
  "a": [
    1,
    {},
    []
  ],
  "b": {
    "c": null
  }
})x");
}

TEST(JinjaFilters, UnknownFilterFails) {
  // Python: TemplateAssertionError: No filter named 'nosuchfilter'.
  EXPECT_TRUE(fails("{{ 1|nosuchfilter }}"));
}

TEST(JinjaFilters, FormatOperator) {
  EXPECT_EQ(render(R"x({{ "%s" | format(none) }} {{ "%d items" % 3 }} {{ "%.3f" % 3.14159 }} {{ "%5.1f|%-5d|%+d" % (2.25, 3, 4) }} {{ "%%" % () }})x"), "None 3 items 3.142   2.2|3    |+4 %");
}

TEST(JinjaFilters, TojsonKeysAndValues) {
  EXPECT_EQ(render(R"x({{ {1: "a", 2.5: "b", true: "c", none: "d"}|tojson }} {{ none|tojson }} {{ "<>&'/"|tojson }} {{ [1, [2, [3]]]|tojson(indent=1) }})x"), R"x({"1": "c", "2.5": "b", "null": "d"} null "<>&'/" [
 1,
 [
  2,
  [
   3
  ]
 ]
])x");
}

TEST(JinjaFilters, TrimUsesPythonWhitespace) {
  EXPECT_EQ(render(R"x([{{ "\t x \n"|trim }}|{{ "\u00a0x\u3000"|trim }}|{{ "xyx"|trim("y") }}])x"), "[x|x|xyx]");
}

TEST(JinjaTests, TypeTests) {
  EXPECT_EQ(render("{{ x is defined }} {{ x is undefined }} {{ d is mapping }} {{ l is sequence }} {{ s is string }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is integer }} {{ true is boolean }} {{ n is none }} {{ s is iterable }} {{ 1 is iterable }} {{ raise_exception is callable }} {{ true is true }} {{ 0 is false }}"), "False True True True True True True True False True True True False True True False");
}

TEST(JinjaTests, ValueTests) {
  EXPECT_EQ(render(R"x({{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 1 is equalto 1 }} {{ 1 is eq 2 }} {{ 2 is gt 1 }} {{ 2 is lessthan 1 }} {{ 1 is in l }} {{ "abc" is lower }} {{ "ABC" is upper }} {{ none is sameas none }} {{ 2 is ne 2 }})x"), "True True True True False True False True True True True False");
}

TEST(JinjaTests, NegatedTests) {
  EXPECT_EQ(render("{{ 1 is not none }} {{ nothing is not defined }} {{ not nothing is defined }}"), "True True True");
}

TEST(JinjaTests, UndefinedChainsFail) {
  // Python: UndefinedError: 'x' is undefined
  EXPECT_TRUE(fails("{{ x.y is defined }}"));
}

TEST(JinjaTests, UnknownTestFails) {
  // Python: TemplateAssertionError: No test named 'nosuchtest'.
  EXPECT_TRUE(fails("{{ 1 is nosuchtest }}"));
}

TEST(JinjaMethods, StringMethods) {
  EXPECT_EQ(render(R"x({{ s.startswith("He") }} {{ s.endswith(("x", "lo")) }} {{ s.lower() }} {{ s.upper() }} {{ s.replace("l", "L") }} {{ s.find("l") }} {{ s.rfind("l") }} {{ s.count("l") }} [{{ "  a ".lstrip() }}|{{ " a  ".rstrip() }}|{{ "xxaxx".strip("x") }}] {{ s.title() }} {{ "it's a b1c".title() }} {{ s.capitalize() }} {{ s.swapcase() }})x"), "True True hello HELLO HeLLo 2 3 2 [a | a|a] Hello It'S A B1C Hello hELLO");
}

TEST(JinjaMethods, Split) {
  EXPECT_EQ(render(R"x({{ "a b  c".split() }} {{ "a,b,,c".split(",") }} {{ "a,b,,c".split(",", 1) }} {{ "a,b,c".rsplit(",", 1) }} {{ "  a  b  ".rsplit(None, 1) }} {{ "x\r\ny\nz".splitlines() }} {{ "".split() }} {{ "".split(",") }})x"), "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,,c'] ['a,b', 'c'] ['  a', 'b'] ['x', 'y', 'z'] [] ['']");
}

TEST(JinjaMethods, MoreStringMethods) {
  EXPECT_EQ(render(R"x({{ "-".join(["a", "b"]) }} {{ "{} {x} {{}}".format(1, x=2) }} {{ "{0}{0}".format("ab") }} {{ "ab".zfill(5) }} {{ "x".rjust(3, ".") }} {{ "x".ljust(3) }}| {{ "a=b".partition("=") }} {{ "pre_x".removeprefix("pre_") }} {{ "5".isdigit() }} {{ "ab".isalpha() }} {{ " ".isspace() }})x"), "a-b 1 2 {} abab 000ab ..x x  | ('a', '=', 'b') x True True True");
}

TEST(JinjaMethods, DictAndListMethods) {
  EXPECT_EQ(render(R"x({{ d.get("a") }} {{ d.get("q", 7) }} {{ d.get("q") }} {{ d.keys()|list }} {{ d.values()|list }} {{ l.count(3) }} {{ l.index(1) }})x"), "1 7 None ['a', 'items'] [1, [1, 2]] 1 1");
}

TEST(JinjaMethods, MutatingMethodsAreRefused) {
  // Python: SecurityError: access to attribute 'append' of 'list' object is unsafe.
  EXPECT_TRUE(fails("{{ l.append(4) }}"));
}

TEST(JinjaMethods, NonAsciiStrings) {
  EXPECT_EQ(render(R"x({{ "héllo"[:-1] }} {{ "日本語"[1] }} {{ "日本語"|length }} {{ "日本語"|reverse }} [{{ "aé"|center(6) }}] {{ "straße ΣΑΣ"|upper }} {{ "ΣΑΣ ΣΑΣ"|lower }} {{ "éa"|title }})x"), R"x(héll 本 3 語本日 [  aé  ] STRASSE ΣΑΣ σας σας Éa)x");
}

TEST(JinjaGlobals, Range) {
  EXPECT_EQ(render("{{ range(3)|list }} {{ range(2, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}"), "[0, 1, 2] [2, 5, 8] [5, 3, 1] []");
}

TEST(JinjaGlobals, RangeIsBounded) {
  // Python: OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).
  EXPECT_TRUE(fails("{{ range(200000)|length }}"));
}

TEST(JinjaGlobals, NamespaceAndDict) {
  EXPECT_EQ(render(R"x({% set ns = namespace(a=1) %}{% set ns.b = [ns.a] %}{{ ns.b }} {{ dict(a=1, b=2) }} {{ dict({"z": 1}, a=2) }} {{ dict([("k", "v")]) }} {{ namespace({"x": 1}).x }})x"), "[1] {'a': 1, 'b': 2} {'z': 1, 'a': 2} {'k': 'v'} 1");
}

TEST(JinjaGlobals, StrftimeNowUsesTheClock) {
  ::setenv("TZ", "UTC", 1);  // the expectation was made in UTC
  ::tzset();
  EXPECT_EQ(render(R"x({{ strftime_now("%Y-%m-%d %H:%M:%S %a %b") }})x"), "2024-07-26 12:00:00 Fri Jul");
}

TEST(JinjaGlobals, RaiseException) {
  // Python: TemplateError: Only user and assistant roles are supported!
  EXPECT_TRUE(fails(R"x({{ raise_exception("Only user and assistant roles are supported!") }})x"));
}

TEST(JinjaErrors, UndefinedAttributeOfUndefinedFails) {
  // Python: UndefinedError: 'nothing' is undefined
  EXPECT_TRUE(fails("{{ nothing.attr }}"));
}

TEST(JinjaErrors, UndefinedArithmeticFails) {
  // Python: UndefinedError: 'nothing' is undefined
  EXPECT_TRUE(fails("{{ nothing + 1 }}"));
}

TEST(JinjaErrors, CallingUndefinedFails) {
  // Python: UndefinedError: 'nothing' is undefined
  EXPECT_TRUE(fails("{{ nothing() }}"));
}

TEST(JinjaErrors, TypeErrorsFail) {
  // Python: TypeError: can only concatenate str (not "int") to str
  EXPECT_TRUE(fails(R"x({{ "a" + 1 }})x"));
}

TEST(JinjaErrors, IteratingNoneFails) {
  // Python: TypeError: 'NoneType' object is not iterable
  EXPECT_TRUE(fails("{% for x in n %}{% endfor %}"));
}

TEST(JinjaErrors, DivisionByZeroFails) {
  // Python: ZeroDivisionError: integer division or modulo by zero
  EXPECT_TRUE(fails("{{ 1 // 0 }}"));
}

TEST(JinjaErrors, UnpackingCountMustMatch) {
  // Python: ValueError: not enough values to unpack (expected 2, got 1)
  EXPECT_TRUE(fails("{% for a, b in [[1, 2], [3]] %}{% endfor %}"));
}

TEST(JinjaErrors, NamespaceAttributeOnlyOnNamespaces) {
  // Python: TemplateRuntimeError: cannot assign attribute on non-namespace object
  EXPECT_TRUE(fails("{% set x = 1 %}{% set x.y = 2 %}"));
}

// --- errors name their line -------------------------------------------------

TEST(JinjaErrors, SyntaxErrorsNameTheirLine) {
  const auto t = Template::parse("line one\n{% if true %}\n{{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, Errc::bad_format);
  EXPECT_EQ(t.error().message.rfind("line 3: ", 0), 0u) << t.error().message;
}

TEST(JinjaErrors, UnclosedBlocksAndUnknownTagsAreSyntaxErrors) {
  for (const char* bad : {"{% if x %}never closed", "{% for x in y %}", "{% endif %}", "{% include 'x' %}",
                          "{% extends 'base' %}", "{{ x", "{{ 'unterminated }}", "{# open comment", "{% break %}",
                          "{% for x in y recursive %}{% endfor %}", "{{ f(*args) }}", "{{ a b }}", "{% set 1 = 2 %}"}) {
    EXPECT_FALSE(Template::parse(bad)) << bad;
  }
}

TEST(JinjaErrors, RaiseExceptionIsAnErrorWithItsMessageAndLine) {
  const auto t = Template::parse("a\nb\n{% if messages | length > 1 %}{{ raise_exception('Too many messages!') }}{% endif %}");
  ASSERT_TRUE(t);
  const auto r = t->render(context());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_EQ(r.error().message, "line 3: Too many messages!");
}

// --- limits: never a crash, never a hang ------------------------------------

TEST(JinjaLimits, RunawayLoopsStopAtTheStepLimit) {
  RenderOptions options;
  options.limits.max_steps = 100'000;
  const auto t = Template::parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t);
  const auto r = t->render({}, {}, options);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("steps"), std::string::npos) << r.error().message;
}

// With the default limits too: an empty loop body still spends the budget
// (each iteration's scope costs several steps), so nested loops of 100,000
// end in a fraction of a second, not in hours.
TEST(JinjaLimits, EmptyLoopsSpendTheDefaultBudget) {
  const auto t = Template::parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x");
  ASSERT_TRUE(t);
  const auto r = t->render({});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("limit of 5000000 steps"), std::string::npos) << r.error().message;
}

TEST(JinjaLimits, OutputAndStringsAreBounded) {
  RenderOptions options;
  options.limits.max_output_bytes = 1 << 20;
  for (const char* src : {"{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                          "{{ 'x' * 10000000 }}", "{{ [1] * 100000000 }}",
                          "{% for i in range(100000) %}{{ 'many bytes of output ' * 10 }}{% endfor %}"}) {
    const auto t = Template::parse(src);
    ASSERT_TRUE(t) << src;
    EXPECT_FALSE(t->render({}, {}, options)) << src;
  }
}

TEST(JinjaLimits, RecursionAndNestingAreBounded) {
  const auto recursive = Template::parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(recursive);
  const auto r = recursive->render({});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("macro calls nest deeper"), std::string::npos) << r.error().message;

  EXPECT_FALSE(Template::parse("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"));
  EXPECT_FALSE(Template::parse("{{ " + std::string(5000, '-') + "1 }}"));
  std::string nested_ifs;
  for (int i = 0; i < 3000; ++i) nested_ifs += "{% if true %}";
  EXPECT_FALSE(Template::parse(nested_ifs));

  const auto deep = Template::parse("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}");
  ASSERT_TRUE(deep);
  EXPECT_FALSE(deep->render({}));
  // A namespace that holds itself prints as an error, not a stack overflow.
  const auto cycle = Template::parse("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  ASSERT_TRUE(cycle);
  EXPECT_FALSE(cycle->render({}));
}

// --- provenance: which bytes came from the caller ----------------------------

std::vector<std::string> data_pieces(const Rendered& r) {
  std::vector<std::string> out;
  for (const TextRange& d : r.data) out.push_back(r.text.substr(d.begin, d.end - d.begin));
  return out;
}

Rendered render_with(std::string_view source, const json::object& data, const json::object& tmpl = {}) {
  auto t = Template::parse(source);
  EXPECT_TRUE(t) << source;
  auto r = t->render(data, tmpl);
  EXPECT_TRUE(r) << source << ": " << (r ? "" : r.error().message);
  return r ? *r : Rendered{};
}

TEST(JinjaProvenance, TemplateTextAndTemplateContextAreNotData) {
  const json::object data = {{"name", "<|im_start|>Bob"}};
  const json::object tmpl = {{"bos_token", "<s>"}};
  const Rendered r = render_with("{{ bos_token }}<|im_start|>user {{ 'literal' }}{{ name }}!", data, tmpl);
  EXPECT_EQ(r.text, "<s><|im_start|>user literal<|im_start|>Bob!");
  EXPECT_EQ(data_pieces(r), (std::vector<std::string>{"<|im_start|>Bob"}));
}

TEST(JinjaProvenance, MovingBytesMovesTheirRanges) {
  const json::object data = {{"a", "  Alice  "}, {"b", "x,Bob,y"}, {"k", json::object{{"key", 1}}}};
  const Rendered r = render_with(
      "[{{ a | trim }}][{{ b.split(',')[1] }}][{{ 'T' ~ a.strip()[1:3] ~ 'T' }}][{{ ['L', b] | join('+') }}]"
      "[{{ b.replace('Bob', 'Robert') }}][{% for k in k %}{{ k }}{% endfor %}]",
      data);
  EXPECT_EQ(r.text, "[Alice][Bob][TliT][L+x,Bob,y][x,Robert,y][key]");
  EXPECT_EQ(data_pieces(r), (std::vector<std::string>{"Alice", "Bob", "li", "x,Bob,y", "x,", ",y", "key"}));
}

TEST(JinjaProvenance, RewritingDataMakesTheWholeResultData) {
  const json::object data = {{"m", json::object{{"role", "user"}, {"content", "hi"}}}};
  const Rendered r = render_with("{{ m.role | upper }} {{ m | tojson }} {{ {'t': 1} | tojson }} {{ m.content | length }}", data);
  EXPECT_EQ(r.text, R"(USER {"role": "user", "content": "hi"} {"t": 1} 2)");
  EXPECT_EQ(data_pieces(r), (std::vector<std::string>{"USER", R"({"role": "user", "content": "hi"})"}));
}

TEST(JinjaProvenance, TemplateContextWinsOverData) {
  const Rendered r = render_with("{{ bos_token }}", {{"bos_token", "evil"}}, {{"bos_token", "<s>"}});
  EXPECT_EQ(r.text, "<s>");
  EXPECT_TRUE(r.data.empty());
}

TEST(JinjaTemplate, RendersConcurrentlyFromOneParse) {
  const auto t = Template::parse("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  ASSERT_TRUE(t);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        auto r = t->render(context());
        if (r && r->text == "user:hi;assistant:yo;") ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 800);
}

}  // namespace
}  // namespace conveyor::jinja
