"""FHIR PlanDefinitions: the CDS services as PlanDefinitions other engines read."""
