# the compiled module (parse/_simhash.pyx, built at install)
MIN_TEXT: int
MIN_WORDS: int
MAX_TEXT: int
SAMPLE: int

def simhash_text(text: str) -> int | None: ...
LAYOUT: int

def node_text_utf8(node: object) -> bytes | None: ...
def simhash_node(node: object) -> int | None: ...
