"""The core every format stands on, naming none of them: the source of the bytes and its
lifetime, the compiled C layer, tables read by their schema's field names, the options of
a load, the dtypes, and the records the C layer fills."""
