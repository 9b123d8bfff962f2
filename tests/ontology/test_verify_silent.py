"""Verification of what would otherwise fail silently at run time: units, FHIRPath, code
systems, hooks, prefetch tokens, and facts nobody reads. Each bad input is refused with the
node named and, where one exists, the suggestion; each good twin verifies clean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.ontology import Problem, load_ontology, verify
from tests.ontology.conftest import DATA, ROOT, T

SOUND = (DATA / "verify_sound.ttl").read_text(encoding="utf-8").split("\n", 1)[1]
HR_MAP = (
    'horis:fromFhir [ horis:resourceType "Observation" ; horis:coding "http://loinc.org|8867-4" ;\n'
    '                     horis:fhirPath "valueQuantity" ] .'
)
SERVICE = """:Service a horis:CdsService ; horis:id "t" ; horis:hook "{hook}" ;
    horis:description "t" ; horis:workflow :Flow {extra};
    horis:prefetch [ horis:key "vitals" ; horis:query "{query}" ] .
"""


def _problems(text: str, tmp_path: Path) -> list[Problem]:
    path = tmp_path / "case.ttl"
    path.write_text(text, encoding="utf-8")
    return verify(load_ontology([path]))


def _mapping(tmp_path: Path, **fields: str) -> list[Problem]:
    parts = {"resourceType": '"Observation"', "coding": '"http://loinc.org|8867-4"'}
    parts.update({"fhirPath": '"valueQuantity"'})
    parts.update(fields)
    body = " ; ".join(f"horis:{k} {v}" for k, v in parts.items())
    return _problems(SOUND.replace(HR_MAP, f"horis:fromFhir [ {body} ] ."), tmp_path)


def _service(tmp_path: Path, hook: str, query: str, extra: str = "") -> list[Problem]:
    return _problems(SOUND + SERVICE.format(hook=hook, query=query, extra=extra), tmp_path)


def _only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


# --- units ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("unit", "meant"),
    [("mmHg", "mm[Hg]"), ("degC", "Cel"), ("beats/min", "{beats}/min"), ("MG", None)],
)
def test_a_property_unit_must_be_ucum_and_says_what_was_meant(
    tmp_path: Path, unit: str, meant: str | None
) -> None:
    problems = _problems(SOUND.replace('horis:unit "/min"', f'horis:unit "{unit}"'), tmp_path)
    if meant is None:  # "MG" is valid UCUM (megagauss): only the mapping's misfit shows
        assert all(p.code != "unit" or "horis:unit" not in (p.path or "") for p in problems)
        return
    p = _only(problems)
    assert (p.code, p.node, p.path, p.suggestion) == ("unit", T + "hr", "horis:unit", meant)
    assert f"'{meant}'" in p.message


def test_ucum_is_case_sensitive_and_a_valid_unit_verifies(tmp_path: Path) -> None:
    assert _problems(SOUND.replace('horis:unit "/min"', 'horis:unit "{beats}/min"'), tmp_path) == []
    p = _only(_problems(SOUND.replace('horis:unit "/min"', 'horis:unit "/MIN"'), tmp_path))
    assert p.code == "unit" and p.suggestion == "/min"


def test_a_unit_a_mapping_tests_for_must_convert_to_the_property_unit(tmp_path: Path) -> None:
    good = _mapping(tmp_path, where="\"valueQuantity.code = '/s'\"")
    assert good == []
    p = _only(_mapping(tmp_path, where="\"valueQuantity.code = 'kg'\""))
    assert (p.code, p.node, p.path) == ("unit", T + "hr", "horis:fromFhir[1]")
    p = _only(_mapping(tmp_path, where="\"valueQuantity.code = 'mmHg'\""))
    assert (p.code, p.suggestion) == ("fhir-path", "mm[Hg]")


def test_an_age_in_years_must_be_in_a_unit_of_time(tmp_path: Path) -> None:
    age = (
        ":age a horis:Property ; horis:domain :Patient ; horis:range xsd:integer ;\n"
        '    horis:unit "{u}" ;\n'
        '    horis:fromFhir [ horis:resourceType "Patient" ; horis:fhirPath "birthDate" ;\n'
        "                     horis:transform horis:YearsSince ] .\n"
        ":Old a horis:Rule ; horis:about :Patient ; horis:when [ horis:property :age ; "
        "horis:atLeast 65 ] ;\n    horis:then [ horis:property :level ; horis:value :High ] .\n"
    )
    assert _problems(SOUND + age.format(u="a"), tmp_path) == []
    p = _only(_problems(SOUND + age.format(u="kg"), tmp_path))
    assert (p.code, p.node, p.suggestion) == ("unit", T + "age", "a")


def test_a_quantity_read_into_a_property_without_a_unit_is_refused(tmp_path: Path) -> None:
    p = _only(_problems(SOUND.replace('    horis:unit "/min" ;\n', ""), tmp_path))
    assert (p.code, p.node) == ("unit", T + "hr")
    assert "declares no horis:unit" in p.message


# --- FHIRPath ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "text", "path", "meant"),
    [
        ("fhirPath", '"valueQuantiy"', "horis:fhirPath", "valueQuantity"),
        ("fhirPath", '"value"', "horis:fhirPath", "valueQuantity"),  # a choice needs its type
        ("where", "\"status = 'final' and subjct.exists()\"", "horis:where", "subject"),
        ("where", "\"interpretation.coding.where(sytem = 'x').exists()\"", "horis:where", "system"),
        ("where", '"status.lenght() > 0"', "horis:where", "length"),
        ("fhirPath", '"valueQuantity)"', "horis:fhirPath", None),  # the engine would read past it
        ("where", '"effectiveDateTime > today()"', "horis:where", None),  # the wall clock
        ("where", '"subject.resolve().exists()"', "horis:where", None),  # not implemented
        ("where", '"%resource.status.exists()"', "horis:where", "%context"),
        ("resourceType", '"Obsrvation"', "horis:resourceType", "Observation"),
        ("fhirPath", '"Observation.valueQuantity"', "horis:fhirPath", None),  # read relative
    ],
)
def test_fhirpath_must_parse_and_name_real_elements(
    tmp_path: Path, field: str, text: str, path: str, meant: str | None
) -> None:
    p = _only(_mapping(tmp_path, **{field: text}))
    assert (p.code, p.node, p.path) == ("fhir-path", T + "hr", f"horis:fromFhir[1]/{path}")
    assert p.suggestion == meant
    if meant is not None:
        assert meant in p.message


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("where", "\"status = 'final' and interpretation.coding.where(code = 'H').exists()\""),
        ("where", "\"component.where(code.coding.code = '8867-4').exists()\""),
        ("where", '"%context.status.exists()"'),
        ("fhirPath", '"valueQuantity"'),
    ],
)
def test_valid_fhirpath_verifies(tmp_path: Path, field: str, text: str) -> None:
    assert _mapping(tmp_path, **{field: text}) == []


def test_a_path_read_on_a_matching_component_must_exist_on_the_component(
    tmp_path: Path,
) -> None:
    # a coded Observation mapping is also read on a panel's component with that code, which has
    # no effective time: the heart rate of a panel would silently never be read
    p = _only(_mapping(tmp_path, fhirPath='"effectiveDateTime"'))
    assert p.code == "fhir-path" and "ObservationComponent" in p.message
    # without a coding, only the resource is read
    uncoded = SOUND.replace(
        HR_MAP,
        'horis:fromFhir [ horis:resourceType "Patient" ; horis:fhirPath "multipleBirthInteger" ] .',
    )
    assert _problems(uncoded, tmp_path) == []


def test_an_element_whose_name_is_a_python_keyword_is_an_element(tmp_path: Path) -> None:
    # Encounter.class (the FHIR models hold it under another name): a real element, read
    encounter = SOUND.replace(
        HR_MAP,
        'horis:fromFhir [ horis:resourceType "Encounter" ; '
        'horis:where "class.code = \'IMP\'" ; horis:fhirPath "length.value" ] .',
    )
    assert _problems(encounter, tmp_path) == []
    p = _only(_problems(encounter.replace("class.code", "klass.code"), tmp_path))
    assert p.code == "fhir-path" and p.suggestion == "class"


def test_what_a_path_yields_must_fit_the_property(tmp_path: Path) -> None:
    p = _only(_mapping(tmp_path, fhirPath='"valueString"'))
    assert p.code == "fhir-path" and "never fits hr" in p.message
    p = _only(_mapping(tmp_path, where='"status"'))
    assert p.code == "fhir-path" and "not a boolean" in p.message


def test_text_sources_and_commit_elements_are_checked(tmp_path: Path) -> None:
    extra = ' ; horis:text [ horis:resourceType "Encounter" ; horis:fhirPath "reasonCode.txt" ] '
    problems = _service(
        tmp_path, "encounter-start", "Observation?patient={{context.patientId}}", extra
    )
    found = {(p.code, p.path, p.suggestion) for p in problems}
    assert ("fhir-path", "horis:text[1]", "text") in found
    # no template reads the Encounter the text comes from
    assert ("prefetch", "horis:text[1]", None) in found
    tool = (
        ':assign a horis:Tool ; horis:takes [ horis:arg [ horis:name "queue" ; '
        'horis:type :Level ] ] ; horis:binding "fhir:commit" ;\n'
        '    horis:commits [ horis:resourceType "Encounter" ; horis:element "priorty" ; '
        'horis:valueArg "queue" ; horis:operation horis:Update ;\n'
        '                    horis:scope "user/Encounter.write" ] .\n'
    )
    p = _only(_problems(SOUND + tool, tmp_path))
    assert (p.code, p.node, p.path, p.suggestion) == (
        "fhir-path",
        T + "assign",
        "horis:commits/horis:element",
        "priority",
    )


# --- code systems --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("system", "meant"),
    [
        ("https://loinc.org", "http://loinc.org"),
        ("http://loinc.org/", "http://loinc.org"),
        ("http://lonic.org", "http://loinc.org"),
        ("loinc.org", "http://loinc.org"),
        ("LOINC", "http://loinc.org"),
        ("http://www.snomed.info/sct", "http://snomed.info/sct"),
        (
            "https://terminology.hl7.org/CodeSystem/v3-ActPriority",
            "http://terminology.hl7.org/CodeSystem/v3-ActPriority",
        ),
        ("8867", None),
    ],
)
def test_a_code_system_must_be_an_absolute_canonical_uri(
    tmp_path: Path, system: str, meant: str | None
) -> None:
    p = _only(_mapping(tmp_path, coding=f'"{system}|8867-4"'))
    assert (p.code, p.node, p.path, p.suggestion) == (
        "code-system",
        T + "hr",
        "horis:fromFhir[1]/horis:coding",
        meant,
    )


@pytest.mark.parametrize("system", ["http://example.org/codes", "urn:oid:2.16.840.1.113883.6.1"])
def test_a_system_of_ones_own_is_accepted(tmp_path: Path, system: str) -> None:
    assert _mapping(tmp_path, coding=f'"{system}|8867-4"') == []


MED_SAFETY = ROOT / "ontologies" / "med-safety.ttl"
MS = "https://horismos.dev/example/med-safety#"


@pytest.mark.parametrize(
    ("closed", "words"),
    [
        ('"http://loinc.org"', "none of this property's code lists"),
        ('"https://snomed.info/sct"', "not the canonical URI of SNOMED CT"),
    ],
)
def test_a_property_is_closed_only_over_a_system_its_lists_use(
    tmp_path: Path, closed: str, words: str
) -> None:
    """Allergies closed over LOINC (no allergy list has a LOINC code) would read every allergy
    as none of ours; a near miss of SNOMED CT's URI would close nothing the data says."""
    text = MED_SAFETY.read_text(encoding="utf-8")
    shutil.copytree(MED_SAFETY.parent / "valuesets", tmp_path / "valuesets")  # its drug products
    good = 'horis:closedOver "http://snomed.info/sct" ;'
    assert good in text
    assert _problems(text, tmp_path) == []
    problems = _problems(text.replace(good, f"horis:closedOver {closed} ;"), tmp_path)
    assert {(p.code, p.node, p.path) for p in problems} == {
        ("code-system", MS + "hasAllergy", "horis:closedOver")
    }
    assert any(words in p.message for p in problems)


# --- hooks and prefetch --------------------------------------------------------------------

VITALS = "Observation?patient={{context.patientId}}"


@pytest.mark.parametrize(
    ("hook", "meant"),
    [("patient-veiw", "patient-view"), ("encounter-strat", "encounter-start"), ("x-ray", None)],
)
def test_the_hook_must_be_a_registry_hook(tmp_path: Path, hook: str, meant: str | None) -> None:
    p = _only(_service(tmp_path, hook, VITALS))
    assert (p.code, p.node, p.path, p.suggestion) == ("hook", T + "Service", "horis:hook", meant)
    assert "horis:customHook true" in p.message


def test_a_custom_hook_is_declared(tmp_path: Path) -> None:
    custom = "; horis:customHook true "
    assert _service(tmp_path, "x-ray", "Observation?patient={{context.subject}}", custom) == []
    p = _only(_service(tmp_path, "patient-view", VITALS, custom))
    assert (p.code, p.path) == ("hook", "horis:customHook")


@pytest.mark.parametrize(
    ("hook", "query", "meant"),
    [
        ("patient-view", "Observation?patient={{context.patient}}", "{{context.patientId}}"),
        ("patient-view", "Observation?patient={{patientId}}", "{{context.patientId}}"),
        ("order-sign", "Observation?patient={{context.draftOrders}}", None),
        ("order-dispatch", "Observation?performer={{userPractitionerId}}", None),
        ("patient-view", "Observaton?patient={{context.patientId}}", "Observation"),
        ("patient-view", "Observation?patient", None),
    ],
)
def test_prefetch_uses_only_the_hooks_tokens_and_real_types(
    tmp_path: Path, hook: str, query: str, meant: str | None
) -> None:
    problems = _service(tmp_path, hook, query)
    p = next(p for p in problems if p.path == "horis:prefetch[vitals]")
    assert (p.code, p.node, p.suggestion) == ("prefetch", T + "Service", meant)


@pytest.mark.parametrize(
    ("hook", "query"),
    [
        ("patient-view", "Observation?patient={{context.patientId}}&category=vital-signs"),
        (
            "patient-view",
            "Observation?performer={{userPractitionerId}}&subject={{context.patientId}}",
        ),
        (
            "order-dispatch",
            "Observation?patient={{context.patientId}}&performer={{context.performer}}",
        ),
        ("encounter-start", "Observation?encounter={{context.encounterId}}"),
        ("medication-refill", "Observation?patient={{ context.patientId }}"),
    ],
)
def test_valid_prefetch_verifies(tmp_path: Path, hook: str, query: str) -> None:
    assert _service(tmp_path, hook, query) == []


def test_every_mapping_must_be_fed_by_a_template_or_the_context(tmp_path: Path) -> None:
    p = _only(_service(tmp_path, "patient-view", "Condition?patient={{context.patientId}}"))
    assert (p.code, p.node) == ("prefetch", T + "Service")
    assert "no prefetch template of this service reads Observation" in p.message
    ctx = SOUND.replace(
        HR_MAP,
        'horis:fromFhir [ horis:resourceType "Observation" ; horis:fromContext "draftOrder" ; '
        'horis:fhirPath "valueQuantity" ] .',
    )
    problems = _problems(ctx + SERVICE.format(hook="order-sign", query=VITALS, extra=""), tmp_path)
    p = _only(problems)
    assert (p.code, p.suggestion) == ("prefetch", "draftOrders")


# --- readers -------------------------------------------------------------------------------


def test_a_coded_class_nobody_can_see_is_reported(tmp_path: Path) -> None:
    symptoms = (
        ":Symptom a horis:Class .\n"
        ':Fever rdfs:subClassOf :Symptom ; horis:code "http://snomed.info/sct|386661006" .\n'
        ':Cough rdfs:subClassOf :Symptom ; horis:code "http://snomed.info/sct|49727002" .\n'
        ":hasSymptom a horis:Property ; horis:domain :Patient ; horis:range :Symptom ;\n"
        '    horis:fromFhir [ horis:resourceType "Condition" ; horis:fhirPath "code" ] .\n'
        ":FeverRule a horis:Rule ; horis:about :Patient ;\n"
        "    horis:when ( [ horis:path ( :hasSymptom ) ; horis:isA {tested} ] ) ;\n"
        "    horis:then [ horis:property :level ; horis:value :High ] .\n"
    )
    p = _only(_problems(SOUND + symptoms.format(tested=":Fever"), tmp_path))
    assert (p.code, p.node, p.path) == ("unread", T + "Cough", "horis:code")
    # a test of the parent sees every coded child
    assert _problems(SOUND + symptoms.format(tested=":Symptom"), tmp_path) == []


# --- what serve loads ----------------------------------------------------------------------


def _horismos(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cli = Path(sys.executable).parent / "horismos"
    return subprocess.run(
        [str(cli), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_verify_with_no_paths_checks_what_serve_would_load() -> None:
    configured = str(DATA / "verify_hook.ttl")
    result = _horismos("verify", env={"HORISMOS_ONTOLOGY_PATHS": configured})
    assert result.returncode == 1
    assert "did you mean 'patient-view'?" in result.stdout
    bundled = _horismos("verify", env={"HORISMOS_ONTOLOGY_PATHS": ""})
    assert bundled.returncode == 0, bundled.stdout + bundled.stderr
    assert bundled.stdout.startswith("ok: ")


def test_the_bundled_deployments_verify_clean() -> None:
    from app.ontology import default_ontology_paths
    from app.ontology.deployments import find_deployments

    for source in find_deployments(default_ontology_paths()):  # each with what it imports
        assert verify(load_ontology(source.paths)) == [], source.id
