# the compiled module (graph/_hyperball.pyx, built at install)
import numpy as np
import numpy.typing as npt

def iterate(
    registers: npt.NDArray[np.uint8],
    scratch: npt.NDArray[np.uint8],
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int64],
    changed: npt.NDArray[np.uint8],
    moved: npt.NDArray[np.int64],
) -> int: ...
def estimate(
    registers: npt.NDArray[np.uint8],
    rows: npt.NDArray[np.int64],
    out: npt.NDArray[np.float32],
    groups: int,
    pair_powers: npt.NDArray[np.float32],
    pair_zeros: npt.NDArray[np.int8],
    scale: npt.NDArray[np.float32],
    bound: npt.NDArray[np.float64],
    linear: npt.NDArray[np.float32],
) -> None: ...
