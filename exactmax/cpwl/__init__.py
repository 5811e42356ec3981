"""CPWL functions as Maxout networks (Theorem 4.2) and the convex Lipschitz corollary."""
