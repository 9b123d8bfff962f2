"""Ontology: Turtle → compiled, immutable ``Ontology``; schema derivation; verification."""

from app.ontology.errors import OntologyError, Problem
from app.ontology.loader import default_ontology_paths, load_ontology, vocabulary_path
from app.ontology.schema import derive_schema
from app.ontology.verify import verify

__all__ = [
    "OntologyError",
    "Problem",
    "default_ontology_paths",
    "derive_schema",
    "load_ontology",
    "verify",
    "vocabulary_path",
]
