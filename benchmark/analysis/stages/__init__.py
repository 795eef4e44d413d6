"""The pipeline's stages: the stage table and each stage's CPU, the limiting stage and the rules
that name it, the capacity projection and the cost model fitted on runs."""
