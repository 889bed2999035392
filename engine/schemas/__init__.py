"""plog.engine.schemas: schemas from a Schema Registry's ``_schemas`` topic (or schema files, or a
registry's REST API) and the decoding of Confluent-framed Avro, Protobuf and JSON Schema
records with them.

* :mod:`.registry_state` rebuilds what a registry serves from its ``_schemas`` records;
* :mod:`.topic_reader` finds and reads the ``_schemas`` partition of log directories,
  past damaged bytes;
* :mod:`.sources` are where schemas come from (the topic, files by id, a registry URL);
* :mod:`.avro_codec`, :mod:`.protobuf_codec`, :mod:`.json_codec` turn a schema into a decoder;
* :mod:`.resolver` (:class:`~.resolver.SchemaResolver`) decodes a framed key or value, or says
  why it shows it raw;
* :mod:`.export` writes schema files, an index and ``_schemas`` JSON lines.
"""
