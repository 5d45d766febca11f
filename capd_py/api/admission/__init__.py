"""Admission as upstream Cluster API's defaulting and validating webhooks (pure): `review.admit(review, mutate)`
answers an AdmissionReview; the rules are in core.py and kubeadm.py; the HTTP side is
capd_py.kube.admission_webhook."""

from capd_py.api.admission.fielderrors import FieldError
from capd_py.api.admission.review import KINDS, Kind, admit, json_patch, webhook_name

__all__ = ["KINDS", "FieldError", "Kind", "admit", "json_patch", "webhook_name"]
