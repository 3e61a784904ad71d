output "public_url" {
  description = "URL of the public load balancer in front of the front ends."
  value       = "http://${aws_lb.frontend.dns_name}"
}

output "controller_urls" {
  description = "Every controller's URL inside the VPC, comma-separated: the CHOPPER_CONTROLLER_URL of front ends and app servers. Whichever leads answers; a standby names the leader."
  value       = local.controller_urls
}

output "controller_private_addresses" {
  description = "Private IP addresses of the controller instances (one leads, the others stand by)."
  value       = aws_instance.controller[*].private_ip
}

output "controller_instance_ids" {
  description = "Instance ids of the controllers, for aws ssm start-session."
  value       = aws_instance.controller[*].id
}

output "controller_state_table_name" {
  description = "Name of the DynamoDB table holding the controllers' leader lease and persisted state."
  value       = aws_dynamodb_table.controller_state.name
}

output "cluster_token_parameter" {
  description = "Parameter Store name of the cluster token (a SecureString). The value itself is never output."
  value       = aws_ssm_parameter.cluster_token.name
}

output "table_name" {
  description = "Name of the kv-cache app's DynamoDB table."
  value       = aws_dynamodb_table.kv.name
}

output "load_driver_instance_id" {
  description = "Instance id of the load driver for aws ssm start-session, or null when load_driver_enabled is false."
  value       = one(aws_instance.load_driver[*].id)
}

output "frontend_asg_name" {
  description = "Name of the front ends' autoscaling group."
  value       = module.frontend.autoscaling_group_name
}

output "appserver_asg_name" {
  description = "Name of the app servers' autoscaling group."
  value       = module.appserver.autoscaling_group_name
}

output "vpc_id" {
  description = "VPC the cluster runs in."
  value       = local.vpc_id
}
