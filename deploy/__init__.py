"""Deployment artefacts generated from the committed weights: a Triton model repository (deploy.triton) and KServe
manifests (deploy/kserve/). Nothing here is imported by the service."""
