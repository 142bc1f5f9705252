import jax.numpy as jnp
import numpy as np
import optax

from lowrank_jax import transforms


def factors(rng, n1=30, n2=20, r=3):
    return (jnp.asarray(rng.standard_normal((n1, r))), jnp.asarray(rng.standard_normal((n2, r))),
            jnp.asarray(rng.standard_normal((n1, r))), jnp.asarray(rng.standard_normal((n2, r))))


def test_scaled_gradient_matches_closed_form(x64):
    L, R, GL, GR = factors(np.random.default_rng(0))
    opt = transforms.scaled_gradient(0.3)
    updates, _ = opt.update((GL, GR), opt.init((L, R)), (L, R))
    np.testing.assert_allclose(updates[0], -0.3 * GL @ np.linalg.inv(R.T @ R), rtol=1e-10)
    np.testing.assert_allclose(updates[1], -0.3 * GR @ np.linalg.inv(L.T @ L), rtol=1e-10)


def test_scaled_gradient_is_gauge_invariant(x64):
    """(L, R) → (LQ, RQ⁻ᵀ) leaves LRᵀ and the updated LRᵀ unchanged when gradients come from f(LRᵀ)."""
    rng = np.random.default_rng(1)
    L, R, _, _ = factors(rng)
    E = jnp.asarray(rng.standard_normal((30, 20)))  # ∇_X f at X = LRᵀ
    Q = jnp.asarray(rng.standard_normal((3, 3))) + 3 * jnp.eye(3)
    L2, R2 = L @ Q, R @ jnp.linalg.inv(Q).T
    a = transforms.scaled_gradient_step((L, R), (E @ R, E.T @ L), 0.5)
    b = transforms.scaled_gradient_step((L2, R2), (E @ R2, E.T @ L2), 0.5)
    np.testing.assert_allclose(a[0] @ a[1].T, b[0] @ b[1].T, rtol=1e-9, atol=1e-10)


def test_chains_with_optax_schedules(x64):
    L, R, GL, GR = factors(np.random.default_rng(2))
    opt = optax.chain(optax.clip(1e6), transforms.scaled_gradient(optax.exponential_decay(1.0, 1, 0.5)))
    state = opt.init((L, R))
    first, state = opt.update((GL, GR), state, (L, R))
    second, state = opt.update((GL, GR), state, (L, R))
    np.testing.assert_allclose(second[0], 0.5 * first[0], rtol=1e-12)
