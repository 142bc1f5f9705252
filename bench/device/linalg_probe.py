"""Batched against single QR, SVD and eigh of small matrices on an accelerator (float64 and
float32): the probe that cleared them of the sketched-Newton discrepancy (docs/scaling.md)."""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
# Full-precision products for the checks themselves (a GPU's default float32 product is TF32).
jax.config.update("jax_default_matmul_precision", "highest")
rng = np.random.default_rng(0)
for dt in (jnp.float64, jnp.float32):
    B = jnp.asarray(rng.standard_normal((3, 48, 6)), dt)
    Rb = jax.vmap(lambda x: jnp.linalg.qr(x, mode="r"))(B)
    Rs = jnp.stack([jnp.linalg.qr(x, mode="r") for x in B])
    print(
        dt.__name__,
        "qr-r |b|-|s|:",
        float(jnp.abs(jnp.abs(Rb) - jnp.abs(Rs)).max()),
        "RtR-BtB:",
        float(jnp.abs(jnp.einsum("bji,bjk->bik", Rb, Rb) - jnp.einsum("bji,bjk->bik", B, B)).max()),
    )
    for name, M in (("svd R 6x6", Rs), ("svd tall 48x6", B)):
        U, s, Vt = jax.vmap(lambda x: jnp.linalg.svd(x, full_matrices=False))(M)
        s1 = jnp.stack([jnp.linalg.svd(x, compute_uv=False) for x in M])
        rec = jnp.einsum("bij,bj,bjk->bik", U, s, Vt)
        print(
            " ",
            name,
            "batched recon:",
            float(jnp.abs(rec - M).max()),
            "s diff:",
            float(jnp.abs(s - s1).max()),
        )
    w, V = jax.vmap(lambda x: jnp.linalg.eigh(x.T @ x))(B)
    G = jnp.einsum("bji,bjk->bik", B, B)
    print(
        "  eigh gram batched recon:",
        float(jnp.abs(jnp.einsum("bij,bj,bkj->bik", V, w, V) - G).max()),
    )
