"""FHIR read into facts: a hook call's resources, as JSON, hydrated into the typed facts of the
World through the ontology's mappings (``hydrate``), with what could not be read recorded as
unread (``unread``, ``inputs``). No I/O: the resources come read (``app.fhir_reads``), the
terminology answers through the port it is given, and writing to the EHR is an adapter's
(``adapters.fhir``)."""
