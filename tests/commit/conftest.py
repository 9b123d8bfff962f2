from tests.support.fhir_server import fhir_server

__all__ = ["fhir_server"]
