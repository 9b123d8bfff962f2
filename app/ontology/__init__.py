"""Ontology: Turtle → compiled, immutable ``Ontology``; schema derivation; verification."""

from app.ontology.errors import OntologyError, Problem
from app.ontology.loader import default_ontology_paths, load_ontology, vocabulary_path

__all__ = [
    "OntologyError",
    "Problem",
    "default_ontology_paths",
    "load_ontology",
    "vocabulary_path",
]
