# The cluster token, CHOPPER_CLUSTER_TOKEN: the shared HMAC key that signs
# every control call (registration, pushes, load collection, lease renewal).
# Terraform generates it and keeps it in Parameter Store as a SecureString.
# Each controller, front end and app server reads it at boot with its own
# role (ssm_parameter in templates/common.sh.tftpl), so it never appears in
# user_data, which anyone allowed to describe instances or launch templates
# can read. Like every secret Terraform creates, it is in the state: keep
# the state private.
resource "random_password" "cluster_token" {
  # Letters and digits only: the value goes into a systemd EnvironmentFile,
  # where quotes, backslashes and spaces would be interpreted.
  length  = 48
  special = false
}

# Encrypted with the AWS managed key aws/ssm. That key lets any principal in
# the account decrypt through Parameter Store, so IAM on the parameter is
# what decides who reads it (iam.tf): no kms:Decrypt grant is needed.
resource "aws_ssm_parameter" "cluster_token" {
  name        = local.cluster_token_parameter
  description = "Chopper cluster token (CHOPPER_CLUSTER_TOKEN) of deployment ${var.name}"
  type        = "SecureString"
  value       = random_password.cluster_token.result
}
