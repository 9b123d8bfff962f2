"""Static checks of a FHIRPath expression against the R4B element model.

``check_path(expression, root)`` parses strictly (the whole text, every syntax error: the
engine's own parser recovers from errors silently, reading ``valueQuantity)`` as
``valueQuantity``) and walks every element name through the types it can reach from ``root``:
through choice elements (``valueQuantity``), backbone elements (``component``) and function
arguments, which are read relative to the function's input (``coding.where(code = 'x')``
reads ``code`` on a Coding). A name that does not exist is a finding, with the name it most
likely meant.

The hook runtime evaluates FHIRPath on FHIR JSON without a FHIR model (``fhirpathpy`` with no
model), so a few things that are valid FHIRPath read nothing there, and are findings too: a
choice element by its base name (``value``), a type test on a FHIR complex type
(``ofType(Quantity)``), a function the engine does not implement, an environment variable
other than ``%context``/``%ucum``, and the wall clock (``today()``, ``now()``), which would make
a run unreplayable. Once a type is not known (the result of an arithmetic expression, say),
the names after it are not checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

from app.ontology._fhir_model import TypeInfo, closest, is_type, type_info
from app.ucum import is_ucum, suggest

#: A set of FHIR type names; None when the type is not known (nothing after it is checked).
Types = frozenset[str] | None

_BOOLEAN: frozenset[str] = frozenset({"boolean"})
_STRING: frozenset[str] = frozenset({"string"})
_INTEGER: frozenset[str] = frozenset({"integer"})
_SAME = frozenset(
    {"where", "first", "last", "tail", "single", "distinct", "skip", "take", "trace"}
    | {"intersect", "exclude", "union", "combine"}
)
_BOOLEAN_FNS = frozenset(
    {"empty", "not", "exists", "all", "allTrue", "anyTrue", "allFalse", "anyFalse"}
    | {"subsetOf", "supersetOf", "isDistinct", "contains", "startsWith", "endsWith"}
    | {"matches", "is", "toBoolean"}
    | {f"convertsTo{t}" for t in ("Boolean", "Date", "DateTime", "Decimal", "Integer")}
    | {f"convertsTo{t}" for t in ("Quantity", "String", "Time")}
)
_STRING_FNS = frozenset(
    {"toString", "lower", "upper", "substring", "replace", "replaceMatches", "trim", "join"}
)
_INTEGER_FNS = frozenset({"count", "length", "indexOf", "toInteger"})
_UCUM_CODE = "ucum code"  # the type of Quantity.code, whose values are UCUM units
_CLOCK = frozenset({"today", "now", "timeOfDay"})
_ENVIRONMENT = frozenset({"context", "ucum"})
#: FHIRPath's own (System) types, which a type test on plain JSON values can match.
_SYSTEM_TYPES = frozenset({"Boolean", "String", "Integer", "Decimal", "Date", "DateTime", "Time"})


@dataclass(frozen=True, kw_only=True)
class PathFinding:
    """One thing wrong with an expression: what, and what was most likely meant."""

    message: str
    suggestion: str | None = None


@dataclass(kw_only=True)
class PathResult:
    """The findings, and the types the expression yields (None: not known)."""

    findings: list[PathFinding] = field(default_factory=list)
    types: Types = None
    units: list[str] = field(default_factory=list)  # UCUM codes a Quantity's code is tested for


class _SyntaxError(Exception):
    pass


@lru_cache(maxsize=512)
def _parse(expression: str) -> dict[str, Any]:
    """The AST of ``expression``, refusing any syntax error and anything after the end."""
    from antlr4 import CommonTokenStream, InputStream
    from antlr4.error.ErrorListener import ErrorListener
    from antlr4.tree.Tree import ParseTreeWalker
    from fhirpathpy.parser.ASTPathListener import ASTPathListener
    from fhirpathpy.parser.generated.FHIRPathLexer import FHIRPathLexer
    from fhirpathpy.parser.generated.FHIRPathParser import FHIRPathParser

    class _Raise(ErrorListener):  # type: ignore[misc]
        def syntaxError(  # antlr's name
            self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any
        ) -> None:
            raise _SyntaxError(f"at character {column + 1}: {msg}")

    lexer = FHIRPathLexer(InputStream(expression))
    lexer.removeErrorListeners()
    lexer.addErrorListener(_Raise())
    parser = FHIRPathParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser.addErrorListener(_Raise())
    tree = parser.entireExpression()  # type: ignore[no-untyped-call]
    listener = ASTPathListener()  # type: ignore[no-untyped-call]
    ParseTreeWalker().walk(listener, tree)
    root: dict[str, Any] = listener.parentStack[0]
    return root


def check_path(expression: str, root: str) -> PathResult:
    """Check ``expression`` read on a value of FHIR type ``root``."""
    result = PathResult()
    try:
        ast = _parse(expression)
    except _SyntaxError as exc:
        result.findings.append(PathFinding(message=f"is not valid FHIRPath ({exc})"))
        return result
    walker = _Walker(root, result)
    start = frozenset({root})
    result.types = walker.expr(ast, start, start, at_start=True)
    return result


def _children(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in node.get("children") or [] if isinstance(c, dict)]


def _identifier(node: dict[str, Any]) -> str:
    text = "".join(node.get("terminalNodeText") or []) or str(node.get("text", ""))
    return text[1:-1] if text.startswith("`") and text.endswith("`") else text


class _Walker:
    def __init__(self, root: str, result: PathResult) -> None:
        self.root = root
        self.result = result

    def find(self, message: str, suggestion: str | None = None) -> None:
        self.result.findings.append(PathFinding(message=message, suggestion=suggestion))

    # --- expressions -----------------------------------------------------------------------

    def expr(
        self, node: dict[str, Any], focus: Types, this: Types, *, at_start: bool = False
    ) -> Types:
        """The types of ``node`` evaluated on ``focus`` (``this`` is the enclosing scope)."""
        kind = node.get("type")
        kids = _children(node)
        if kind in (None, "EntireExpression", "TermExpression", "ParenthesizedTerm"):
            return self.expr(kids[0], focus, this, at_start=at_start) if kids else None
        if kind == "InvocationTerm":
            return self.invocation(kids[0], focus, this, at_start=at_start)
        if kind == "InvocationExpression":
            left = self.expr(kids[0], focus, this, at_start=at_start)
            return self.invocation(kids[1], left, this, at_start=False)
        if kind == "LiteralTerm":
            return self.literal(kids[0] if kids else node)
        if kind == "ExternalConstantTerm":
            return self.constant(node)
        if kind == "IndexerExpression":
            self.expr(kids[1], this, this)
            return self.expr(kids[0], focus, this, at_start=at_start)
        if kind == "PolarityExpression":
            return self.expr(kids[0], focus, this)
        if kind == "UnionExpression":
            left = self.expr(kids[0], focus, this, at_start=at_start)
            right = self.expr(kids[1], focus, this, at_start=at_start)
            return None if left is None or right is None else left | right
        if kind == "TypeExpression":
            self.expr(kids[0], focus, this, at_start=at_start)
            target = self.type_test(_type_name_of(kids[1]) if len(kids) > 1 else "")
            op = (node.get("terminalNodeText") or ["is"])[0]
            return _BOOLEAN if op == "is" else target
        sides = [self.expr(k, focus, this, at_start=at_start) for k in kids]
        if kind in ("EqualityExpression", "InequalityExpression"):
            self.quantity_literal_comparison(kids, sides)
        if kind in ("EqualityExpression", "MembershipExpression"):
            for kid, other in zip(kids, reversed(sides), strict=False):
                if other is not None and _UCUM_CODE in other:
                    self.unit_literals(kid)
        if kind in (
            "EqualityExpression",
            "InequalityExpression",
            "MembershipExpression",
            "AndExpression",
            "OrExpression",
            "ImpliesExpression",
        ):
            return _BOOLEAN
        return None  # arithmetic: the result type is not tracked

    def invocation(
        self, node: dict[str, Any], focus: Types, this: Types, *, at_start: bool
    ) -> Types:
        kind = node.get("type")
        kids = _children(node)
        if kind == "MemberInvocation":
            return self.member(_identifier(kids[0]), focus, at_start=at_start)
        if kind == "FunctionInvocation":
            return self.function(kids[0], focus, this)
        if kind == "ThisInvocation":
            return this
        if kind == "IndexInvocation":
            return _INTEGER
        return None

    def literal(self, node: dict[str, Any]) -> Types:
        kind = node.get("type")
        if kind == "StringLiteral":
            return _STRING
        if kind == "BooleanLiteral":
            return _BOOLEAN
        if kind == "NumberLiteral":
            return frozenset({"decimal", "integer"})
        if kind == "NullLiteral":
            return frozenset()
        if kind == "QuantityLiteral":
            self.quantity_unit(node)
            return frozenset({"System.Quantity"})
        return None

    def quantity_unit(self, node: dict[str, Any]) -> None:
        for unit in _walk(node):
            if unit.get("type") != "Unit":
                continue
            text = "".join(unit.get("terminalNodeText") or []) or str(unit.get("text", ""))
            if text.startswith("'") and text.endswith("'"):
                code = text[1:-1]
                if not is_ucum(code):
                    hint = suggest(code)
                    self.find(
                        f"quantity unit '{code}' is not UCUM (UCUM is case-sensitive)"
                        + (f": did you mean '{hint.code}' ({hint.meaning})?" if hint else ""),
                        hint.code if hint else None,
                    )

    def unit_literals(self, node: dict[str, Any]) -> None:
        """String literals compared with a Quantity's code: UCUM codes the path names."""
        for n in _walk(node):
            if n.get("type") != "StringLiteral":
                continue
            code = str(n.get("text", "")).strip("'")
            if is_ucum(code):
                self.result.units.append(code)
                continue
            hint = suggest(code)
            self.find(
                f"compares a Quantity's code with '{code}', which is not UCUM (UCUM is "
                "case-sensitive)"
                + (f": did you mean '{hint.code}' ({hint.meaning})?" if hint else ""),
                hint.code if hint else None,
            )

    def quantity_literal_comparison(self, kids: list[dict[str, Any]], sides: list[Types]) -> None:
        literal = any(s == frozenset({"System.Quantity"}) for s in sides)
        fhir = any(s is not None and "Quantity" in s for s in sides)
        if literal and fhir:
            self.find(
                "compares a FHIR Quantity with a quantity literal, which the service's FHIRPath "
                "engine cannot do on FHIR JSON (it raises): compare its value, e.g. "
                "valueQuantity.value > 90, and check the unit with its code"
            )

    def constant(self, node: dict[str, Any]) -> Types:
        name = "".join(_identifier(n) for n in _walk(node) if n.get("type") == "Identifier")
        if not name:
            text = str(node.get("text", "")).lstrip("%")
            name = text.strip("'`")
        if name == "context":
            return frozenset({self.root})
        if name == "ucum":
            return _STRING
        self.find(
            f"%{name} is not defined when the service evaluates FHIRPath (only %context and "
            "%ucum are)",
            "%context" if name in ("resource", "rootResource") else None,
        )
        return None

    # --- members ---------------------------------------------------------------------------

    def member(self, name: str, focus: Types, *, at_start: bool) -> Types:
        if focus is None:
            return None
        if at_start and name[:1].isupper() and type_info(name) is not None:
            # FHIRPath allows Observation.code, but the service reads member paths relative to
            # the resource (or component) it has, where no element is called Observation
            self.find(
                f"starts with the type name {name}: the service reads paths relative to the "
                f"resource, so drop '{name}.'"
            )
            return None
        out: set[str] = set()
        infos: list[TypeInfo] = []
        for t in focus:
            info = type_info(t)
            if info is None:
                continue
            if t == "Resource":
                return None  # any resource: its elements are not known here
            infos.append(info)
            element = info.elements.get(name)
            if element is not None:
                out.update(element.types)
                if t == "Quantity" and name == "code":
                    out.add(_UCUM_CODE)
        if out:
            return frozenset(out)
        if not infos:
            primitive = ", ".join(sorted(focus)) or "nothing"
            self.find(f"reads '{name}' on {primitive}, which has no elements")
            return None
        where = " or ".join(sorted(i.name for i in infos))
        for info in infos:
            if name in info.choices:
                options = ", ".join(info.choices[name][:4])
                self.find(
                    f"'{name}' is a choice element of {info.name}: the service reads FHIR JSON, "
                    f"where it is always typed ({options}, …); name the type: did you mean "
                    f"'{_prefer(info.choices[name])}'?",
                    _prefer(info.choices[name]),
                )
                return None
        pool = [e for i in infos for e in i.elements]
        hint = closest(name, pool)
        self.find(
            f"{where} has no element '{name}'" + (f": did you mean '{hint}'?" if hint else ""),
            hint,
        )
        return None

    # --- functions -------------------------------------------------------------------------

    def function(self, node: dict[str, Any], focus: Types, this: Types) -> Types:
        from fhirpathpy.engine.invocations import invocation_registry

        kids = _children(node)
        name = _identifier(kids[0]) if kids else ""
        params = _children(kids[1]) if len(kids) > 1 else []
        registry = cast(dict[str, dict[str, Any]], invocation_registry)
        spec = registry.get(name)
        if spec is None or name in ("isOp", "asOp", "inOp", "containsOp"):
            hint = closest(name, (n for n in registry if n.isalpha()))
            self.find(
                f"{name}() is not a function the service's FHIRPath engine implements"
                + (f": did you mean {hint}()?" if hint else ""),
                hint,
            )
            return None
        arity: dict[int, list[Any]] = spec.get("arity") or {0: []}
        kinds = arity.get(len(params))
        if kinds is None:
            counts = " or ".join(str(n) for n in sorted(arity))
            self.find(f"{name}() takes {counts} argument(s), not {len(params)}")
            kinds = []
        if name in _CLOCK:
            self.find(
                f"{name}() reads the wall clock, so a replayed run would read another time: "
                "bound a reading's age with horis:maxAge (measured against the hook call)"
            )
        results: list[Types] = []
        for i, p in enumerate(params):
            kind = kinds[i] if i < len(kinds) else "Any"
            if kind == "TypeSpecifier":
                results.append(self.type_test(_type_name_of(p)))
            elif kind == "Expr":
                results.append(self.expr(p, focus, focus))
            else:
                results.append(self.expr(p, this, this))
        if name in _SAME:
            return focus
        if name in ("ofType", "as"):
            return results[0] if results else None
        if name == "select":
            return results[0] if results else None
        if name == "iif":
            branches = results[1:]
            if any(b is None for b in branches):
                return None
            return frozenset().union(*(b for b in branches if b is not None))
        if name == "extension":
            return frozenset({"Extension"})
        if name in _BOOLEAN_FNS:
            return _BOOLEAN
        if name in _STRING_FNS:
            return _STRING
        if name in _INTEGER_FNS:
            return _INTEGER
        return None

    def type_test(self, name: str) -> Types:
        bare = name.removeprefix("FHIR.").removeprefix("System.")
        if name.startswith("System.") or bare in _SYSTEM_TYPES:
            return frozenset({bare[0].lower() + bare[1:]})
        if bare[:1].islower():
            return frozenset({bare})  # a FHIR primitive: plain JSON values match it
        if is_type(bare):
            self.find(
                f"a type test on {bare} matches nothing when the service reads FHIR JSON (it "
                "has no FHIR model): name the typed element instead, e.g. value" + bare,
            )
        else:
            self.find(f"{bare} is not a FHIR type")
        return None


def _type_name_of(node: dict[str, Any]) -> str:
    parts = [_identifier(n) for n in _walk(node) if n.get("type") == "Identifier"]
    return ".".join(parts)


def _walk(node: dict[str, Any]) -> Iterable[dict[str, Any]]:
    yield node
    for child in _children(node):
        yield from _walk(child)


def _prefer(options: tuple[str, ...]) -> str:
    return next((o for o in options if o.endswith("Quantity")), options[0])
